#!/usr/bin/env bash
# The gateway's MCP door: the real @modelcontextprotocol/sdk client in a sandbox (host image)
# talks to $RUNBOX_API_URL/v1/mcp/files with the run token; the upstream is the SDK's own
# Server with StreamableHTTPServerTransport on host 127.0.0.1 (tests/mcp/server.mjs), in both
# answer modes (enableJsonResponse true: application/json; false: text/event-stream), checking
# the credential the gateway adds and logging what it saw. Checked, each with its control: the
# tool list shows only allowed tools (the upstream has four, as a direct client on the host
# sees), an allowed tool answers, a disallowed one (alone or in a batch) is refused with a
# JSON-RPC error and never reaches the upstream (which runs it when a direct client sends it),
# the credential is nowhere in the sandbox (answers, environment, files) even when the upstream echoes it, the run token and
# the client's Accept-Encoding never go upstream, sessions are the run's (another run's local id
# and the upstream's own id are 404 while the upstream still serves that session), a policy
# without network.mcp is 403 with the uniform body, a policy that narrows the tools narrows
# them, every call is a gateway_call event of door mcp in the ledger, a tools/call the
# policy's network.approval holds reaches the upstream only after `runbox approve` (deny: never),
# and a tools/call retried with its Idempotency-Key runs upstream once (another key: again).
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init gwmcp

DIR=$ROOT/tests/mcp
UP_PID="" BG=""
mcp_cleanup() {
	[ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null
	[ -n "$BG" ] && kill "$BG" 2>/dev/null
	lib_cleanup
}
trap mcp_cleanup EXIT
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	not_ok "node and npm are installed" "missing (scripts/install-deps.sh test installs Debian's nodejs and npm)"
	exit 0
fi
# The pinned SDK, installed by `npm ci` only when node_modules is missing or older than the lock.
if [ ! -f "$DIR/node_modules/.package-lock.json" ] || [ "$DIR/package-lock.json" -nt "$DIR/node_modules/.package-lock.json" ]; then
	if ! out=$(cd "$DIR" && npm ci --no-audit --no-fund 2>&1); then
		not_ok "npm ci installs the pinned MCP SDK" "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
		exit 0
	fi
fi
ver=$(node -p 'require(process.argv[1]).version' "$DIR/node_modules/@modelcontextprotocol/sdk/package.json" 2>/dev/null)
[ "$ver" = 1.32.2 ] && ok "the MCP SDK is the pinned 1.32.2" || not_ok "the MCP SDK is the pinned 1.32.2" "found '$ver'"

OWNER=0
[ "$MODE" = root ] || OWNER=$NOBODY
# A credential with the bytes each encoding changes, matching no format rule of the scrubber,
# so the runner's own scrub of stdout cannot hide a leak.
SECRET="rbxmcp\"q\\z/+=&%$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$T/cred"
chmod 0600 "$T/cred"
chown $OWNER "$T/cred"
policy_variant default "$T/pol.json" gwmcp "p['network'] = {'mode': 'gateway', 'mcp': ['files']}"
policy_variant default "$T/pol-none.json" gwmcpnone "p['network'] = {'mode': 'gateway'}"
policy_variant default "$T/pol-apr.json" gwmcpapr \
	"p['network'] = {'mode': 'gateway', 'mcp': ['files'], 'approval': [{'mcp': 'files', 'tools': ['ech*'], 'timeout_s': 120}]}"
policy_variant default "$T/pol-narrow.json" gwmcpnarrow \
	"p['network'] = {'mode': 'gateway', 'mcp': [{'name': 'files', 'tools': ['echo', 'admin*']}]}"

# mcp_run POLICY CLIENT-ARGS...: the SDK client in a step; its output in $T/client.json.
mcp_run() {
	local p=$1
	shift
	run_rbx run --image host --json --policy "$p" --gateway-config "$T/gw.json" --timeout 90s \
		--input "$DIR:/workspace/in/mcp" -- /usr/bin/node /workspace/in/mcp/client.mjs "$@"
	json "$T/out" stdout >"$T/client.json" 2>/dev/null || : >"$T/client.json"
}
# c PYEXPR: PYEXPR on the client's output (d); "" when it does not evaluate.
c() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T/client.json" "$1" 2>/dev/null; }
# up PYEXPR: how many requests the upstream logged for which PYEXPR (on r) holds.
up() {
	"$PY" -c 'import json,sys
n=0
for l in open(sys.argv[1]):
    r=json.loads(l); b=r.get("body"); ms=b if isinstance(b,list) else [b]
    n+=bool(eval(sys.argv[2]))
print(n)' "$T/up.log" "$1" 2>/dev/null || echo 0
}
# check NAME PYEXPR-ON-d [WHY-EXPR]: ok when the client's output satisfies it.
check() {
	if [ "$(c "$2")" = True ]; then ok "$1"; else not_ok "$1" "$(c "${3:-str(d)[:400]}") (run exit $RC: $(first_line "$ERR"))"; fi
}
leak_check() {
	RBX_S="$SECRET" "$PY" - "$T/client.json" "$T/up.log" <<'PYEOF'
import base64, json, os, sys, urllib.parse
d = json.load(open(sys.argv[1]))
blob = bytes(x ^ 0x5A for x in bytes.fromhex(d["seen_hex"]))
s = os.environ["RBX_S"]
forms = {"raw": s, "base64": base64.b64encode(s.encode()).decode(), "url": urllib.parse.quote(s, safe=""),
         "json": json.dumps(s)[1:-1], "piece": s[-12:]}
bad = [k for k, f in forms.items() if f.encode() in blob]
up = open(sys.argv[2], "rb").read()
print("leaked=%s upstream_has_it=%s marks=%d" % (",".join(bad) or "none", json.dumps(s)[1:-1].encode() in up,
                                                blob.count(b"[REDACTED:exact:mcp.files")))
PYEOF
}

for AMODE in json sse; do
	TAG="gwmcp [$MODE] [$AMODE] "
	: >"$T/up.log"
	rm -f "$T/port"
	node "$DIR/server.mjs" "$T/port" "$T/up.log" "$T/cred" "$AMODE" 2>"$T/up.err" &
	UP_PID=$!
	for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
	PORT=$(cat "$T/port" 2>/dev/null)
	[ -n "$PORT" ] || { not_ok "the upstream MCP server starts" "$(head -c 300 "$T/up.err")"; continue; }
	URL="http://127.0.0.1:$PORT/mcp"
	"$PY" - "$T/gw.json" "$URL" "$T/cred" <<'PYEOF'
import json, sys
f, url, cred = sys.argv[1:]
s = {"url": url, "credential": {"file": cred}, "inject": "bearer", "tools": ["echo", "leak*", "admin_stats"]}
json.dump({"mcp": {"files": s, "other": dict(s)}, "private_upstreams": ["127.0.0.1"]}, open(f, "w"))
PYEOF
	chmod a+r "$T/gw.json"

	# Control: a client on the host, straight to the upstream with its credential, sees all four
	# tools and gets delete_everything run.
	(cd "$DIR" && node client.mjs files --direct "$URL" "$T/cred") >"$T/client.json" 2>"$T/direct.err"
	cp "$T/client.json" "$T/direct.json"
	n=$(up '"tools/call" in json.dumps(ms) and "delete_everything" in json.dumps(ms)')
	if [ "$(c 'sorted(d["tools"])')" = "['admin_stats', 'delete_everything', 'echo', 'leak_credential']" ] && [ "$n" -ge 1 ]; then
		ok "control: straight to the upstream, a client lists 4 tools and delete_everything runs there"
	else not_ok "control: the upstream serves 4 tools and runs delete_everything" "$(c 'd.get("tools")') calls $n $(head -c 200 "$T/direct.err")"; fi
	DIRECT_AE=$(up '"accept-encoding" in r["headers"]')

	# 1. The SDK client in the sandbox, through the gateway.
	: >"$T/up.log"
	mcp_run "$T/pol.json" files --keep
	cp "$T/out" "$T/run1.json"
	check "the SDK client connects through \$RUNBOX_API_URL/v1/mcp/files with the run token" 'd["connect"].get("ok") is True'
	check "tools/list shows only the allowed tools (echo, leak_credential, admin_stats of 4)" \
		'sorted(d["tools"]) == ["admin_stats", "echo", "leak_credential"]' 'd.get("tools")'
	check "an allowed tool answers" 'd["echo"] == [{"type": "text", "text": "echo: hello-mcp"}]' 'd.get("echo")'
	check "a disallowed tool is refused with a JSON-RPC error (-32602, rule mcp.tools, the uniform fields)" \
		'd["denied"]["code"] == -32602 and d["denied"]["data"]["rule"] == "mcp.tools" and "not allowed" in d["denied"]["data"]["error"] and d["denied"]["data"]["hint"] and d["denied"]["data"]["host"] == "127.0.0.1:'"$PORT"'"' 'd.get("denied")'
	n=$(up '"delete_everything" in json.dumps(ms)')
	[ "$n" = 0 ] && ok "the disallowed call never reached the upstream (control: sent straight, it ran)" ||
		not_ok "the disallowed call never reached the upstream" "$n requests"
	check "a batch holding a refused call is answered with a JSON-RPC error per request" \
		'd["batch"]["status"] == 200 and [e["id"] for e in json.loads(d["batch"]["body"])] == [901, 902] and all(e["error"]["code"] == -32602 for e in json.loads(d["batch"]["body"]))' 'd.get("batch")'
	n=$(up '"delete_everything" in json.dumps(ms) or 901 in [m.get("id") for m in ms if isinstance(m, dict)]')
	[ "$n" = 0 ] && ok "no message of the refused batch reached the upstream, its allowed call neither" || not_ok "the refused batch stayed in the gateway" "$n requests"
	all=$(up 'True')
	authed=$(up 'r["auth_ok"]')
	[ "$all" -ge 5 ] && [ "$all" = "$authed" ] && ok "the upstream saw the operator's credential on each of the run's $all requests" ||
		not_ok "the upstream saw the operator's credential on each request" "$authed of $all"
	tok=$(c 'bytes(x ^ 0x5A for x in bytes.fromhex(d["seen_hex"])).decode("latin-1").split("RUNBOX_TOKEN\":\"")[1].split("\"")[0]')
	if [ -z "$tok" ]; then not_ok "the run token never goes upstream" "no token in the client's environment"
	elif grep -qF "$tok" "$T/up.log"; then not_ok "the run token never goes upstream" "the upstream got it"
	else ok "the run token never goes upstream (control: the client had it and sent it to the gateway)"; fi
	n=$(up '"accept-encoding" in r["headers"]')
	[ "$n" = 0 ] && [ "${DIRECT_AE:-0}" -ge 1 ] && ok "the client's Accept-Encoding is not forwarded (an answer must stay scrubbable; control: the direct client sends it)" ||
		not_ok "the client's Accept-Encoding is not forwarded" "gateway $n, direct ${DIRECT_AE:-0}"
	res=$(leak_check 2>&1)
	case $res in
	"leaked=none upstream_has_it=True marks="*) m=${res##*marks=}
		[ "$m" -ge 4 ] && ok "no form of the credential reaches the sandbox (answers, env, /proc/self/environ), though the upstream echoed it: $m redactions" ||
			not_ok "the upstream's echo of the credential comes back redacted" "$res" ;;
	*) not_ok "no form of the credential reaches the sandbox" "$res" ;;
	esac
	L=$(c 'd["connect"]["session"]')
	U=$("$PY" -c 'import json,sys
for l in open(sys.argv[1]):
    s=json.loads(l)["headers"].get("mcp-session-id")
    if s: print(s); break' "$T/up.log" 2>/dev/null)
	blob=$(c 'bytes(x ^ 0x5A for x in bytes.fromhex(d["seen_hex"])).decode("latin-1").replace("\0", " ")')
	if [ -n "$L" ] && [ -n "$U" ] && [ "$L" != "$U" ] && case $L in mcp-*) true ;; *) false ;; esac &&
		! grep -qF "$L" "$T/up.log" && ! grep -qF "$U" <<<"$blob$(cat "$T/client.json")"; then
		ok "the sandbox's session id is the run's local name; the upstream's id never enters the sandbox"
	else not_ok "the session ids are translated" "local '$L' upstream '$U'"; fi
	RUN1=$(json "$T/run1.json" run_id)
	"$PY" - "$STATE/ledger.db" "$RUN1" <<'PYEOF' | report "$(cat)"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ev = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call' AND run_id=?", (sys.argv[2],))]
mcp = [e for e in ev if e.get("door") == "mcp"]
lst = [e for e in mcp if e.get("mcp_method") == "tools/list" and e.get("tools_removed") == 1 and e.get("tools_listed") == 3]
call = [e for e in mcp if e.get("mcp_method") == "tools/call" and e.get("tool") == "echo" and e["status"] == 200 and e.get("bytes_down", 0) > 0 and e.get("server") == "files"]
ref = [e for e in mcp if e.get("tool") == "delete_everything" and e.get("refused") and e.get("rule") == "mcp.tools"]
ok = len(mcp) >= 6 and lst and call and ref and all(e.get("connector") == "files" for e in mcp)
print(("ok\tthe ledger has each MCP call: door mcp, server, JSON-RPC method, tool, status, bytes, rule (%d events)" % len(mcp)) if ok
      else "not_ok\tthe ledger has each MCP call\t%d mcp events, list %d call %d refused %d: %s" % (len(mcp), len(lst), len(call), len(ref), json.dumps(mcp)[:400]))
PYEOF

	# 2. Sessions are the run's: another run names the first run's local id, and the upstream's.
	mcp_run "$T/pol.json" files --foreign "$L" --foreign "$U"
	RUN2=$(json "$T/out" run_id)
	"$PY" - "$STATE/ledger.db" "$RUN2" "$AMODE" <<'PYEOF' | report "$(cat)"
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ev = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call' AND run_id=?", (sys.argv[2],))]
mcp = [e for e in ev if e.get("door") == "mcp"]
lst = [e for e in mcp if e.get("mcp_method") == "tools/list" and e.get("status") == 200]
dele = [e for e in mcp if e.get("method") == "DELETE" and e.get("status") == 200 and e.get("mcp_session")]
sess = [e for e in mcp if e.get("rule") == "mcp.session" and e.get("status") == 404 and e.get("refused")]
ok = lst and all(e.get("mcp_answer") == sys.argv[3] for e in lst) and dele and len(sess) == 3
print(("ok\tthe answers came as %s (the ledger says so), the session's DELETE and the three refused session ids (two foreign, one ended) are recorded" % sys.argv[3]) if ok
      else "not_ok\tthe answer mode, DELETE and session refusals in the ledger\t%s" % json.dumps([{k: e.get(k) for k in ("method", "mcp_method", "status", "rule", "mcp_answer")} for e in mcp])[:500])
PYEOF
	check "another run's session id is not this run's: 404, rule mcp.session" \
		'd["foreign0"]["status"] == 404 and json.loads(d["foreign0"]["body"])["rule"] == "mcp.session"' 'd.get("foreign0")'
	check "the upstream's own session id is not a session of the run either: 404" \
		'd["foreign1"]["status"] == 404 and json.loads(d["foreign1"]["body"])["rule"] == "mcp.session"' 'd.get("foreign1")'
	check "control: that run's own session works" 'd["connect"].get("ok") is True and d["echo"][0]["text"] == "echo: hello-mcp"'
	check "DELETE ends the session: its id is refused afterwards (404, rule mcp.session)" \
		'd["terminate"] == {"ok": True} and d["after_delete"]["status"] == 404 and json.loads(d["after_delete"]["body"])["rule"] == "mcp.session"' 'd.get("after_delete")'
	st=$(RBX_S="$SECRET" "$PY" - "$URL" "$U" <<'PYEOF'
import json, os, sys, urllib.request
r = urllib.request.Request(sys.argv[1], data=json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}).encode(),
    headers={"Authorization": "Bearer " + os.environ["RBX_S"], "Mcp-Session-Id": sys.argv[2], "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2025-11-25"})
try:
    print(urllib.request.urlopen(r, timeout=10).status)
except Exception as e:
    print(getattr(e, "code", e))
PYEOF
)
	[ "$st" = 200 ] && ok "control: the upstream still serves the first run's session (straight from the host: 200)" ||
		not_ok "control: the upstream still serves the first run's session" "$st"

	# 2b. Idempotency-Key on tools/call: the same key twice reaches the upstream once, the
	# second answer the first one replayed; control: another key is another call.
	: >"$T/up.log"
	mcp_run "$T/pol.json" files --idem
	n=$(up '"idem-1" in json.dumps(ms) and "tools/call" in json.dumps(ms)')
	check "a tools/call retried with its Idempotency-Key gets the first answer replayed (Idempotent-Replayed)" \
		'd["idem0"]["status"] == 200 and "echo: idem-1" in d["idem0"]["body"] and d["idem1"]["replayed"] == "true" and d["idem1"]["body"] == d["idem0"]["body"] and d["idem0"]["replayed"] is None' \
		'(d.get("idem0"), d.get("idem1"))'
	[ "$n" = 2 ] && [ "$(c 'd["idem2"]["replayed"] is None and "echo: idem-1" in d["idem2"]["body"]')" = True ] &&
		ok "the upstream ran the tool once for key k1's two calls, and again for key k2 (control): $n calls" ||
		not_ok "one upstream call per Idempotency-Key" "$n upstream calls; $(c 'd.get("idem2")')"

	# 3. A policy that does not grant the server: 403, the uniform body; nothing upstream.
	: >"$T/up.log"
	mcp_run "$T/pol-none.json" files
	check "a policy without network.mcp granting the server is refused 403 with {error, rule, host, hint}" \
		'd["connect"].get("code") == 403 and all(k in d["connect"]["error"] for k in ("\"rule\":\"network.mcp\"", "\"hint\"", "\"host\"", "\"error\""))' 'd.get("connect")'
	[ "$(up 'True')" = 0 ] && ok "the ungranted server got nothing (control: granted, it served the run above)" || not_ok "the ungranted server got nothing" "$(up 'True') requests"

	# 4. A policy narrowing the server's tools.
	mcp_run "$T/pol-narrow.json" files
	check "a policy's network.mcp tools narrow the list (echo and admin*: echo, admin_stats)" \
		'sorted(d["tools"]) == ["admin_stats", "echo"]' 'd.get("tools")'
	check "a tool the config allows but the policy does not is refused (-32602)" \
		'd["leak"]["code"] == -32602 and d["leak"]["data"]["rule"] == "mcp.tools"' 'd.get("leak")'
	# 5. Approvals (once, with the event-stream server): a tools/call of a held tool waits for
	# `runbox approve` and reaches the upstream only then; `runbox deny` refuses it.
	if [ "$AMODE" = sse ]; then
		for decision in approve deny; do
			: >"$T/up.log"
			rbx_cmd run --image host --json --policy "$T/pol-apr.json" --gateway-config "$T/gw.json" --timeout 120s \
				--input "$DIR:/workspace/in/mcp" -- /usr/bin/node /workspace/in/mcp/client.mjs files
			"${RBX_CMD[@]}" </dev/null >"$T/held.out" 2>"$T/held.err" &
			BG=$!
			for _ in $(seq 600); do
				run_rbx approve
				[ "$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$T/out" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
				sleep 0.1
			done
			cp "$T/out" "$T/pending.json"
			ID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["id"])' "$T/pending.json" 2>/dev/null)
			n=$(up '"echo" in json.dumps(ms)')
			if [ "$decision" = approve ]; then
				"$PY" - "$T/pending.json" "$T/cred" "$PORT" "$n" <<'PYEOF' | report "$(cat)"
import json, sys
r = json.load(open(sys.argv[1]))[0]
want = {"mcp": "files", "tool": "echo", "method": "tools/call", "effect": "tools/call files echo",
        "target": "127.0.0.1:" + sys.argv[3], "credential_scope": "files", "arguments": {"text": "hello-mcp"}}
bad = [k for k, v in want.items() if r.get(k) != v] + [k for k in ("args_digest", "policy_result", "tenant", "run", "expires") if not r.get(k)]
bad += ["the credential is in the request"] if open(sys.argv[2]).read().strip() in json.dumps(r) else []
bad += ["the upstream got it while held (%s)" % sys.argv[4]] if sys.argv[4] != "0" else []
print("ok\tthe held tools/call is listed by `runbox approve` (server, tool, effect, its arguments, digest, target, scope by name) and not sent while held" if not bad
      else "not_ok\tthe held tools/call's request\t%s: %s" % (bad, json.dumps(r)[:300]))
PYEOF
			fi
			run_rbx "$decision" "$ID"
			wait "$BG"
			BG=""
			json "$T/held.out" stdout >"$T/client.json" 2>/dev/null || : >"$T/client.json"
			n=$(up '"echo" in json.dumps(ms) and "tools/call" in json.dumps(ms)')
			if [ "$decision" = approve ]; then
				[ "$(c 'd["echo"][0]["text"]')" = "echo: hello-mcp" ] && [ "$n" = 1 ] &&
					ok "after runbox approve the held call is sent once and answers" ||
					not_ok "after approve the held call is sent once and answers" "upstream $n, $(c 'd.get("echo")') $(first_line "$(cat "$T/held.err")")"
			else
				[ "$(c 'd["echo"]["data"]["rule"]')" = approval ] && [ "$n" = 0 ] &&
					ok "runbox deny refuses the held call with a JSON-RPC error (rule approval); it never reaches the upstream" ||
					not_ok "deny refuses the held call" "upstream $n, $(c 'd.get("echo")')"
			fi
			# A held tool in a batch: refused whole at once, never held (the approval would show one
			# call and carry the batch's others past it); nothing of it reaches the upstream.
			n=$(up 'any(isinstance(m, dict) and m.get("id") in (911, 912) for m in ms)')
			[ "$(c '[e["error"]["data"]["rule"] for e in json.loads(d["heldbatch"]["body"])]')" = "['approval', 'approval']" ] &&
				[ "$n" = 0 ] && ok "a batch holding a call held for approval is refused whole (rule approval), not held; none of it reaches the upstream ($decision run)" ||
				not_ok "a batch holding a held call is refused whole" "upstream $n, $(c 'd.get("heldbatch")')"
		done
	fi
	kill "$UP_PID" 2>/dev/null
	wait "$UP_PID" 2>/dev/null
	UP_PID=""
done
TAG="gwmcp [$MODE] "

# No file the sandbox can read holds the credential, with the MCP server granted (control: the
# same search finds it in a file bound in on purpose).
PIECE=${SECRET:7}
mkdir -p "$T/ctl" && cp "$T/cred" "$T/ctl/" && chmod -R a+rX "$T/ctl"
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" --input "$T/ctl:/workspace/in/h" -- \
	/bin/sh -c "grep -rlF -e '$PIECE' /workspace/in/h; true"
case $OUT in *in/h/cred*) ok "control: a credential file bound in on purpose is found by the search below" ;;
*) not_ok "control: the search finds a bound credential file" "$(first_line "$OUT$ERR")" ;; esac
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- \
	/bin/sh -c "grep -rlF -e '$PIECE' /etc /tmp /root /run /workspace /proc/self/environ 2>/dev/null | grep -v '^/proc/self/cmdline'; echo end"
if [ "$RC" = 0 ] && [ "$OUT" = end ]; then ok "the MCP credential is in no file the sandbox can read (/etc, /tmp, /root, /run, /workspace, its environ)"
else not_ok "the MCP credential is in no file the sandbox can read" "exit $RC: $(first_line "$OUT$ERR")"; fi

# The policy's shape: errors named by JSON path; control: the test's policies validate.
policy_variant default "$T/bad1.json" bad1 "p['network'] = {'mode': 'none', 'mcp': ['files']}"
policy_variant default "$T/bad2.json" bad2 "p['network'] = {'mode': 'gateway', 'mcp': [{'name': 'files', 'tools': ['a*b']}]}"
policy_variant default "$T/bad3.json" bad3 "p['network'] = {'mode': 'gateway', 'mcp': [{'name': 'Files'}]}"
policy_variant default "$T/bad4.json" bad4 "p['network'] = {'mode': 'gateway', 'approval': [{'mcp': 'files', 'methods': ['POST']}]}"
for i in 1 2 3 4; do run_rbx policy validate "$T/bad$i.json"; cp "$T/err" "$T/bad$i.err"; cat "$T/out" >>"$T/bad$i.err"; done
grep -q 'network.mcp.*gateway' "$T/bad1.err" && grep -q 'network.mcp\[0\].tools' "$T/bad2.err" &&
	grep -q 'network.mcp\[0\].name' "$T/bad3.err" && grep -q 'network.approval\[0\].*tools, not methods' "$T/bad4.err" && ok "bad network.mcp entries are refused, named by JSON path" ||
	not_ok "bad network.mcp entries are refused by path" "$(cat "$T"/bad*.err | head -c 300)"
run_rbx policy validate "$T/pol-narrow.json"
[ "$RC" = 0 ] && ok "control: the test's network.mcp policy validates" || not_ok "control: the network.mcp policy validates" "$(first_line "$ERR$OUT")"
