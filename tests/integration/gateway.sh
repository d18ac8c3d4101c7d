#!/usr/bin/env bash
# The gateway's connector door: a step calls $RUNBOX_API_URL/v1/connectors/NAME/PATH, the
# upstream (a small HTTP server on host 127.0.0.1 that records what it received) sees the
# operator's credential, and no byte of it reaches the sandbox (environment, files,
# /proc/self/environ, answers: the upstream echoes it in raw, base64, URL and JSON forms);
# client credentials are stripped, redirects are not followed, bad tokens, unlisted routes,
# traversal paths, header injection and smuggling shapes are refused with a JSON denial and
# recorded in the ledger; the gateway config is validated strictly. Every check has its
# control; the installing proxy: pip downloads from an allowed local index, not from another,
# and IP literals, other ports (absolute form and CONNECT) and calls without the token are refused. Traffic goes
# only to 127.0.0.1.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init gateway

FIX=$ROOT/tests/integration/fixtures/gateway
UP_PID=""
gw_cleanup() {
	[ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null
	lib_cleanup
}
trap gw_cleanup EXIT
command -v curl >/dev/null || { skip "gateway tests" "curl missing"; exit 0; }

OWNER=0
[ "$MODE" = root ] || OWNER=$NOBODY
"$PY" "$FIX/upstream.py" "$T/port" "$T/up.log" 2>"$T/up.err" &
UP_PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port" 2>/dev/null)
[ -n "$PORT" ] || { not_ok "upstream starts" "$(cat "$T/up.err")"; exit 0; }

# A credential with the bytes each encoding changes (", \, /, +, =, &, %), matching no format
# rule of the scrubber, so the runner's own scrub of stdout cannot hide a leak.
SECRET="rbxcred\"q\\z/+=&%$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
ENVSECRET="rbxenvcred$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$SECRET" >"$T/cred"
chmod 0600 "$T/cred"
chown $OWNER "$T/cred"
printf 'user:%s\n' "$SECRET" >"$T/basic"
chmod 0600 "$T/basic"
chown $OWNER "$T/basic"
cp "$T/cred" "$T/cred644" && chmod 0644 "$T/cred644" && chown $OWNER "$T/cred644"

# conf FILE PRIVATE: a gateway config; PRIVATE is the private_upstreams JSON ("" for none).
conf() {
	"$PY" - "$1" "$PORT" "$T" "$2" <<'PYEOF'
import json, sys
f, port, t, priv = sys.argv[1:]
url = "http://127.0.0.1:%s" % port
r = [{"methods": ["GET", "POST"], "paths": ["/v1/*"]}]
c = {"connectors": {
    "echo": {"url": url, "credential": {"file": t + "/cred"}, "inject": "bearer", "routes": r},
    "hdr": {"url": url, "credential": {"env": "RBX_GW_ENVCRED"}, "inject": {"header": "X-Api-Key"}, "routes": r},
    "qry": {"url": url + "/", "credential": {"file": t + "/cred"}, "inject": {"query": "key"}, "routes": r},
    "bas": {"url": url, "credential": {"file": t + "/basic"}, "inject": "basic", "routes": r},
    "lax": {"url": url, "credential": {"file": t + "/cred644"}, "inject": "bearer", "routes": r},
    "ten": {"url": url, "credential": {"file": t + "/cred"}, "inject": "bearer",
            "routes": [{"methods": ["GET"], "paths": ["/v1/*"], "tenants": ["another-tenant"]}]},
    "down": {"url": "http://127.0.0.1:1", "credential": {"file": t + "/cred"}, "inject": {"query": "key"}, "routes": r},
    "other": {"url": url, "credential": {"file": t + "/cred"}, "inject": "bearer", "routes": r}}}
if priv:
    c["private_upstreams"] = json.loads(priv)
json.dump(c, open(f, "w"))
PYEOF
	chmod a+r "$1"
}
conf "$T/gw.json" '["127.0.0.1"]'
conf "$T/gw-nopriv.json" ''
policy_variant default "$T/pol.json" gwtest \
	'p["network"] = {"mode": "gateway", "connectors": ["echo", "hdr", "qry", "bas", "lax", "down", "ten"]}'

# spec FILE JSON: the client's calls.
spec() { printf '%s' "$2" >"$1" && chmod a+r "$1"; }
# gw_run CONFIG SPEC [RUN-OPTIONS]: one step running the client in the host image; the
# result in $T/out, the client's output in $T/client.json.
gw_run() {
	local c=$1 s=$2
	shift 2
	run_rbx run --image host --json --policy "$T/pol.json" --gateway-config "$c" --timeout 60s \
		--input "$FIX/client.py:/workspace/in/client.py" --input "$s:/workspace/in/spec.json" "$@" -- \
		/usr/bin/python3 /workspace/in/client.py /workspace/in/spec.json
	json "$T/out" stdout >"$T/client.json" 2>/dev/null
}
# status NAME: the status the client got for its call NAME.
status() {
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print([c.get("status", c.get("exception")) for c in d["calls"] if c["name"]==sys.argv[2]][0])' \
		"$T/client.json" "$1" 2>/dev/null
}
# body NAME: the body (decoded) the client got for its call NAME.
body() {
	"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(bytes(x ^ 0x5A for x in bytes.fromhex([c.get("body_hex","") for c in d["calls"] if c["name"]==sys.argv[2]][0])).decode("latin-1"))' \
		"$T/client.json" "$1" 2>/dev/null
}
# expect_status CHECK NAME STATUS
expect_status() {
	local got
	got=$(status "$2")
	if [ "$got" = "$3" ]; then ok "$1"
	else not_ok "$1" "call $2 got ${got:-nothing} (want $3); run exit $RC: $(first_line "$ERR")"; fi
}
# up_count PYEXPR: how many requests the upstream recorded for which PYEXPR (on r) is true.
up_count() {
	"$PY" -c 'import json,sys
n=0
for l in open(sys.argv[1]):
    r=json.loads(l); h={k.lower(): v for k, v in r["headers"]}
    n+=bool(eval(sys.argv[2]))
print(n)' "$T/up.log" "$1" 2>/dev/null || echo 0
}
: >"$T/up.log"
chmod a+rw "$T/up.log"

# ---------------------------------------------------------------------------------------
# 1. The credentialed call, and what the sandbox sees of the credential.
spec "$T/s1.json" '[
 {"name": "echo", "path": "/v1/connectors/echo/v1/echo?case=bearer",
  "headers": {"Cookie": "session=client-cookie", "Proxy-Authorization": "Basic Y2xpZW50OnByb3h5", "X-Client": "kept"}},
 {"name": "post", "method": "POST", "path": "/v1/connectors/echo/v1/post?case=post", "body": "hello-upstream",
  "headers": {"Content-Type": "text/plain"}},
 {"name": "hdr", "path": "/v1/connectors/hdr/v1/echo?case=hdr", "headers": {"X-Api-Key": "client-forged"}},
 {"name": "qry", "path": "/v1/connectors/qry/v1/echo?case=qry&key=client-forged"},
 {"name": "bas", "path": "/v1/connectors/bas/v1/echo?case=basic"},
 {"name": "redirect", "path": "/v1/connectors/echo/v1/redirect"},
 {"name": "big", "path": "/v1/connectors/echo/v1/big", "digest": true},
 {"name": "frag", "raw": "GET /v1/connectors/echo/v1/a#/b c?case=frag HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"},
 {"name": "qinj", "path": "/v1/connectors/qry/v1/echo?case=qinj&x=a%26key%3Dforged%23f&k%65y=forged2"}
]'
RBX_ENV=("RBX_GW_ENVCRED=$ENVSECRET")
gw_run "$T/gw.json" "$T/s1.json"
RBX_ENV=()
cp "$T/out" "$T/run1.json"
expect_status "a connector call reaches its upstream (bearer)" echo 200
expect_status "a POST with a body goes through" post 200
# The secret comes through the environment.
n=$(RBX_S="$SECRET" "$PY" -c 'import json,os
s=os.environ["RBX_S"]; n=0
for l in open("'"$T/up.log"'"):
    r=json.loads(l); h={k.lower(): v for k, v in r["headers"]}
    n+=r["path"].endswith("case=bearer") and h.get("authorization")=="Bearer "+s and "cookie" not in h and "proxy-authorization" not in h and h.get("x-client")=="kept"
print(n)')
if [ "$n" = 1 ]; then ok "the upstream sees the operator's bearer credential; the client's Cookie and Proxy-Authorization are stripped, other headers kept"
else not_ok "the upstream sees the operator's bearer credential; the client's Cookie and Proxy-Authorization are stripped, other headers kept" "$(head -c 600 "$T/up.log")"; fi
tok=$("$PY" -c 'import json,sys; print(bytes(x ^ 0x5A for x in bytes.fromhex(json.load(open(sys.argv[1]))["runt_hex"])).decode())' "$T/client.json" 2>/dev/null)
if [ -z "$tok" ]; then not_ok "the run token never goes upstream" "no token in the client's output"
elif grep -qF "$tok" "$T/up.log"; then not_ok "the run token never goes upstream" "the upstream got it"
else ok "the run token never goes upstream (control: the client sent it to the gateway)"; fi
n=$(up_count 'r["path"].endswith("case=post") and r["body"] == "hello-upstream"')
[ "$n" = 1 ] && ok "the request body reaches the upstream" || not_ok "the request body reaches the upstream" "$n requests"
n=$(RBX_S="$ENVSECRET" "$PY" -c 'import json,os
s=os.environ["RBX_S"]; n=0
for l in open("'"$T/up.log"'"):
    r=json.loads(l); h={k.lower(): v for k, v in r["headers"]}
    n+=r["path"].endswith("case=hdr") and h.get("x-api-key")==s and "authorization" not in h
print(n)')
[ "$n" = 1 ] && ok "a header connector adds X-Api-Key from the gateway's environment, replacing the client's" ||
	not_ok "a header connector adds X-Api-Key from the gateway's environment, replacing the client's" "$(status hdr)"
n=$(RBX_S="$SECRET" "$PY" -c 'import json,os,urllib.parse
s=os.environ["RBX_S"]; n=0
for l in open("'"$T/up.log"'"):
    r=json.loads(l); q=urllib.parse.parse_qs(urllib.parse.urlsplit(r["path"]).query)
    n+="case=qry" in r["path"] and q.get("key")==[s]
print(n)')
[ "$n" = 1 ] && ok "a query connector adds key= (URL-encoded), replacing the client's" ||
	not_ok "a query connector adds key= (URL-encoded), replacing the client's" "$(grep qry "$T/up.log" | head -c 300)"
# What was decided is what is sent: a raw '#' (which libcurl would take for a fragment, cutting
# the path after the route matched it) and a space reach the upstream encoded, the path whole;
# a decoded '&', '=' or '#' in a query value stays inside that value (no second key=, nothing
# cut), and the client's own key= in any spelling is replaced by the credential.
n=$(up_count 'r["path"] == "/v1/a%23/b%20c?case=frag"')
[ "$n" = 1 ] && ok "a raw '#' and space in a connector path reach the upstream percent-encoded, the path whole" ||
	not_ok "a raw '#' in a connector path reaches the upstream encoded" "$(status frag): $(grep -a 'frag\|"/v1/a' "$T/up.log" | head -c 300)"
n=$(RBX_S="$SECRET" "$PY" -c 'import json,os,urllib.parse
s=os.environ["RBX_S"]; n=0
for l in open("'"$T/up.log"'"):
    r=json.loads(l); q=urllib.parse.parse_qs(urllib.parse.urlsplit(r["path"]).query)
    n+="case=qinj" in r["path"] and q.get("key")==[s] and q.get("x")==["a&key=forged#f"]
print(n)')
[ "$n" = 1 ] && ok "a decoded '&', '=' or '#' in a query value stays in that value: one key=, the credential" ||
	not_ok "a decoded '&' in a query value stays in that value" "$(grep -a qinj "$T/up.log" | head -c 300)"
n=$(RBX_S="$SECRET" "$PY" -c 'import json,os,base64
s=os.environ["RBX_S"]; n=0
for l in open("'"$T/up.log"'"):
    r=json.loads(l); h={k.lower(): v for k, v in r["headers"]}
    n+="case=basic" in r["path"] and h.get("authorization")=="Basic "+base64.b64encode(("user:"+s).encode()).decode()
print(n)')
[ "$n" = 1 ] && ok "a basic connector adds Authorization: Basic" || not_ok "a basic connector adds Authorization: Basic" "$(status bas)"

# No byte of either credential in anything the sandbox saw: the answers (each echoing it in
# four encodings), its environment, /proc/self/environ; control: the upstream log has them,
# and the answers carry the scrubber's marks where the upstream put them.
leaks=$(RBX_S="$SECRET" RBX_E="$ENVSECRET" "$PY" - "$T/client.json" "$T/up.log" <<'PYEOF'
import base64, json, os, sys, urllib.parse
d = json.load(open(sys.argv[1]))
unhx = lambda h: bytes(x ^ 0x5A for x in bytes.fromhex(h))
blob = b"".join(unhx(c.get(k, "")) for c in d["calls"] for k in ("body_hex", "headers_hex"))
blob += unhx(d["env_hex"]) + unhx(d["proc_environ_hex"])
up = open(sys.argv[2], "rb").read()
bad, ctl = [], []
for s in (os.environ["RBX_S"], os.environ["RBX_E"]):
    forms = {"raw": s, "base64": base64.b64encode(s.encode()).decode(), "url": urllib.parse.quote(s, safe=""),
             "json": json.dumps(s)[1:-1], "piece": s[-12:]}
    for k, f in forms.items():
        if f.encode() in blob:
            bad.append(k)
    ctl.append(s.encode() in up or json.dumps(s)[1:-1].encode() in up)
marks = blob.count(b"[REDACTED:exact:connector.")
print("leaked=%s control=%s marks=%d" % (",".join(bad) or "none", all(ctl), marks))
PYEOF
)
case $leaks in
"leaked=none control=True marks="*) m=${leaks##*marks=}
	if [ "$m" -ge 8 ]; then ok "no byte of the credentials reaches the sandbox (answers in 4 encodings, env, /proc/self/environ); $m redactions, the upstream saw them"
	else not_ok "no byte of the credentials reaches the sandbox" "only $m redactions: the upstream's echo did not come back ($leaks)"; fi ;;
*) not_ok "no byte of the credentials reaches the sandbox" "$leaks" ;;
esac
mkdir -p "$T/ctl" && cp "$T/cred" "$T/ctl/" && chmod -R a+rX "$T/ctl"
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" --input "$T/ctl:/workspace/in/h" -- \
	/bin/sh -c "cat /workspace/in/h/cred; grep -rlF -e '${SECRET:22}' /etc /tmp /root /run /workspace/in/h 2>/dev/null | grep -v '/in/h/' ; true"
if printf '%s' "$OUT" | grep -qF "${SECRET:22}"; then
	ok "control: a credential file the policy lets a step bind is readable, so the file search below can see one"
else not_ok "control: a bound credential file is readable" "$(first_line "$OUT$ERR")"; fi
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- \
	/bin/sh -c "cat '$T/cred' 2>&1; grep -rlF -e '${SECRET:22}' /etc /tmp /root /run /workspace /proc/self/environ 2>/dev/null; echo end"
if printf '%s' "$OUT" | grep -qF "${SECRET:22}"; then not_ok "the credential is in no file the sandbox can read" "$OUT"
elif [ "$RC" != 0 ]; then not_ok "the credential is in no file the sandbox can read" "exit $RC: $(first_line "$ERR")"
else ok "the credential is in no file the sandbox can read (its host file, /etc, /tmp, /root, /run, /workspace)"; fi

expect_status "a redirect comes back to the client" redirect 302
n=$(up_count 'r["path"] == "/v1/echo"')
m=$(up_count 'r["path"] == "/v1/redirect"')
[ "$n" = 0 ] && [ "$m" = 1 ] && ok "a redirect is not followed (the upstream got /v1/redirect once, never its target)" ||
	not_ok "a redirect is not followed" "/v1/echo $n times, /v1/redirect $m"
big=$("$PY" -c 'import json,sys; c=[c for c in json.load(open(sys.argv[1]))["calls"] if c["name"]=="big"][0]; print(c.get("len"), c.get("sha256"))' "$T/client.json" 2>/dev/null)
want=$("$PY" -c 'import hashlib; print(8388608, hashlib.sha256(b"0123456789abcdef"*4096*128).hexdigest())')
[ "$big" = "$want" ] && ok "an 8 MiB answer streams through whole" || not_ok "an 8 MiB answer streams through whole" "got $big"

# ---------------------------------------------------------------------------------------
# 2. Refusals: each a JSON {error, rule, host, hint}, none reaching the upstream.
other_tok=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["runt_hex"])' "$T/client.json" 2>/dev/null)
: >"$T/up.log"
spec "$T/s2.json" '[
 {"name": "ok", "path": "/v1/connectors/echo/v1/ok?case=control"},
 {"name": "route", "path": "/v1/connectors/echo/admin"},
 {"name": "method", "method": "DELETE", "path": "/v1/connectors/echo/v1/x"},
 {"name": "dotdot", "path": "/v1/connectors/echo/v1/../admin"},
 {"name": "enc-dotdot", "path": "/v1/connectors/echo/v1/%2e%2e/admin"},
 {"name": "enc-DOTDOT", "path": "/v1/connectors/echo/v1/%2E%2E/admin"},
 {"name": "half-enc", "path": "/v1/connectors/echo/v1/.%2e/admin"},
 {"name": "dot", "path": "/v1/connectors/echo/v1/./x"},
 {"name": "slashes", "path": "/v1/connectors/echo/v1//x"},
 {"name": "enc-slash", "path": "/v1/connectors/echo/v1/a%2fb"},
 {"name": "enc-backslash", "path": "/v1/connectors/echo/v1/a%5cb"},
 {"name": "enc-nul", "path": "/v1/connectors/echo/v1/a%00b"},
 {"name": "unknown", "path": "/v1/connectors/nope/v1/x"},
 {"name": "ungranted", "path": "/v1/connectors/other/v1/x?case=ungranted"},
 {"name": "no-token", "path": "/v1/connectors/echo/v1/x?case=notoken", "token": "none"},
 {"name": "forged", "path": "/v1/connectors/echo/v1/x?case=forged", "token": "forged"},
 {"name": "other-run", "path": "/v1/connectors/echo/v1/x?case=otherrun", "token": "'"$other_tok"'"},
 {"name": "lax-file", "path": "/v1/connectors/lax/v1/x?case=lax"},
 {"name": "tenant-route", "path": "/v1/connectors/ten/v1/x?case=tenantroute"},
 {"name": "env-missing", "path": "/v1/connectors/hdr/v1/x?case=envmissing"},
 {"name": "down", "path": "/v1/connectors/down/v1/x?case=down"},
 {"name": "cr-inject", "raw": "GET /v1/connectors/echo/v1/x?case=cr HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\nX-A: a\rX-Injected: 1\r\nConnection: close\r\n\r\n"},
 {"name": "fold-inject", "raw": "GET /v1/connectors/echo/v1/x?case=fold HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\nX-A: a\r\n X-Folded: 1\r\nConnection: close\r\n\r\n"},
 {"name": "smuggle", "raw": "POST /v1/connectors/echo/v1/x?case=smuggle HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\nGET /v1/smuggled HTTP/1.1\r\nHost: a\r\n\r\n"}
]'
gw_run "$T/gw.json" "$T/s2.json"
cp "$T/out" "$T/run2.json"
expect_status "control: an allowed route in the same run goes through" ok 200
expect_status "a path no route allows is refused (403)" route 403
expect_status "a method no route allows is refused (403)" method 403
for c in dotdot enc-dotdot enc-DOTDOT half-enc dot slashes enc-slash enc-backslash enc-nul; do
	expect_status "traversal shape $c is refused (403)" $c 403
done
expect_status "an unknown connector is 404" unknown 404
expect_status "a connector the policy does not grant is refused (403)" ungranted 403
expect_status "a call without the run token is refused (401)" no-token 401
expect_status "a forged token is refused (401)" forged 401
expect_status "another run's token is refused (401; it worked in its own run)" other-run 401
expect_status "a credential file with mode 0644 fails closed (403)" lax-file 403
expect_status "a route of another tenant's is no route for this run (403; control: the same path on echo, 200)" tenant-route 403
expect_status "a credential variable missing from the gateway's environment fails closed (403)" env-missing 403
b=$(body down)
case "$(status down) $b" in '502 '*'"rule":"upstream"'*) ok "an upstream that does not answer is 502, rule upstream (its record is in the leak check below)" ;;
*) not_ok "an upstream that does not answer is 502" "$(status down) $b" ;; esac
b=$(body env-missing)
case $b in *'"rule":"credential"'*) case $b in *'connector `hdr`'*) ok "the missing secret's denial names the connector and the rule" ;;
	*) not_ok "the missing secret's denial names the connector" "$b" ;; esac ;;
*) not_ok "the missing secret's denial names the rule" "$b" ;; esac
case $ERR in *"credential variable RBX_GW_ENVCRED is not set"*"mode 0644"* | *"mode 0644"*"credential variable RBX_GW_ENVCRED is not set"*)
	ok "the gateway says on stderr why each credential is unavailable (the variable, the file's mode)" ;;
*) not_ok "the gateway says on stderr why each credential is unavailable" "$(printf '%s' "$ERR" | head -c 400)" ;; esac
s=$(status cr-inject)
case $s in 400 | 403) ok "a header with a bare CR is refused ($s)" ;; *) not_ok "a header with a bare CR is refused" "got $s" ;; esac
n=$(up_count '"x-injected" in h or "x-folded" in h or "smuggled" in r["path"] or "case=cr" in r["path"]')
[ "$n" = 0 ] && ok "no injected or folded header and no smuggled request reaches the upstream" ||
	not_ok "no injected or folded header and no smuggled request reaches the upstream" "$(head -c 600 "$T/up.log")"
b=$(body route)
if "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); assert set(d)=={"error","rule","host","hint"} and d["rule"]=="route" and d["host"]=="127.0.0.1:'"$PORT"'" and d["hint"]' "$b" 2>/dev/null; then
	ok "a denial is JSON {error, rule, host, hint}"
else not_ok "a denial is JSON {error, rule, host, hint}" "$b"; fi
b=$(body enc-slash)
case $b in *'"rule":"path"'*) ok "a traversal denial names rule path" ;; *) not_ok "a traversal denial names rule path" "$b" ;; esac
# (the smuggling call's outer POST is allowed, and goes through: its hidden request must not)
n=$(up_count 'not r["path"].endswith("case=control") and not r["path"].endswith("case=smuggle")')
m=$(up_count 'r["path"].endswith("case=control")')
[ "$n" = 0 ] && [ "$m" = 1 ] && ok "no refused call reached the upstream (control: the allowed one did)" ||
	not_ok "no refused call reached the upstream" "$n others, $m control: $(head -c 400 "$T/up.log")"

# The record: one gateway_call event per call, refusals with their rule; no credential.
rid=$(json "$T/run2.json" run_id)
rec=$(RBX_S="$SECRET" "$PY" - "$STATE/ledger.db" "$rid" <<'PYEOF'
import json, os, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE run_id=? AND type='gateway_call'", (sys.argv[2],))]
allblob = json.dumps([r for (r,) in db.execute("SELECT data FROM events")])
by = {}
for r in rows:
    by.setdefault((r.get("rule"), r.get("status")), 0)
    by[(r.get("rule"), r.get("status"))] += 1
ok_row = [r for r in rows if r.get("status") == 200]
print("n=%d route403=%d path403=%d token401=%d grant403=%d cred403=%d ok=%s leak=%s" % (
    len(rows), by.get(("route", 403), 0), by.get(("path", 403), 0), by.get(("token", 401), 0),
    by.get(("network.connectors", 403), 0), by.get(("credential", 403), 0),
    bool(ok_row) and all(k in ok_row[0] for k in ("door", "connector", "method", "route", "bytes_up", "bytes_down", "upstream_ms", "gateway_ms", "step")),
    os.environ["RBX_S"][-12:] in allblob))
PYEOF
)
case $rec in
*"route403=3 path403=9 token401=3 grant403=1 cred403=2 ok=True leak=False") ok "each call is a gateway_call ledger event with door, connector, method, route, status, bytes and times; no credential ($rec)" ;;
*) not_ok "each call is a gateway_call ledger event" "$rec" ;; esac
check "the step's result counts the refused calls and says the first" \
	'r["gateway"]["calls_refused"] >= 15 and "refused" in r["gateway"]["hint"]' 'r.get("gateway")'

# Text mode: a step whose calls were refused ends with the one-line hint on stderr; one whose
# calls all went through does not.
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- /bin/sh -c \
	'curl -s -o /dev/null -H "Authorization: Bearer $RUNBOX_TOKEN" "$RUNBOX_API_URL/v1/connectors/echo/v1/fine"'
if [ "$RC" = 0 ] && ! grep -q "gateway refused" "$T/err"; then ok "control: no hint when every call went through"
else not_ok "control: no hint when every call went through" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- /bin/sh -c \
	'curl -s -o /dev/null -H "Authorization: Bearer $RUNBOX_TOKEN" "$RUNBOX_API_URL/v1/connectors/echo/etc/passwd"'
if [ "$(grep -c "gateway refused" "$T/err")" = 1 ] && grep -q "rule route" "$T/err"; then ok "a refused call ends the step with a one-line hint on stderr"
else not_ok "a refused call ends the step with a one-line hint on stderr" "$(first_line "$ERR")"; fi

# ---------------------------------------------------------------------------------------
# 3. The upstream's address: loopback is refused unless private_upstreams names it.
: >"$T/up.log"
spec "$T/s3.json" '[{"name": "echo", "path": "/v1/connectors/echo/v1/x?case=nopriv"}]'
gw_run "$T/gw-nopriv.json" "$T/s3.json"
b=$(body echo)
case "$(status echo) $b" in "403 "*loopback*'"rule":"address"'*) ok "an upstream on a loopback address is refused when private_upstreams does not name it (control: named, above, it works)" ;;
*) not_ok "an upstream on a loopback address is refused when private_upstreams does not name it" "$(status echo) $b" ;; esac
[ "$(up_count 'True')" = 0 ] && ok "the refused upstream got nothing" || not_ok "the refused upstream got nothing" "$(head -c 300 "$T/up.log")"

# ---------------------------------------------------------------------------------------
# 4. The config and the policy are validated strictly, errors naming the JSON path.
printf '{"connectors": {"echo": {"url": "http://127.0.0.1:1", "credential": {"file": "/x"}, "inject": "bearer", "routes": [{"methods": ["GET"], "paths": ["/v1/*"]}], "retry": 3}}}' >"$T/bad1.json"
printf '{"connectors": {"echo": {"url": "http://127.0.0.1:1", "credential": {"file": "/x"}, "inject": "bearer", "routes": [{"methods": "GET", "paths": ["/v1/*"]}]}}}' >"$T/bad2.json"
printf '{"connectors": {}, "private_upstream": ["127.0.0.1"]}' >"$T/bad3.json"
chmod a+r "$T"/bad*.json
for i in 1 2 3; do
	run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/bad$i.json" -- /bin/sh -c \
		'curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $RUNBOX_TOKEN" "$RUNBOX_API_URL/v1/connectors/echo/v1/x"'
	cp "$T/err" "$T/bad$i.err"
	cp "$T/out" "$T/bad$i.out"
done
grep -q 'gateway config .*bad1.json: connectors.echo.retry: unknown key' "$T/bad1.err" &&
	ok "an unknown connector key is named by path" || not_ok "an unknown connector key is named by path" "$(head -c 300 "$T/bad1.err")"
grep -q 'bad2.json: connectors.echo.routes\[0\].methods: expected an array of strings' "$T/bad2.err" &&
	ok "a wrong type is named by path" || not_ok "a wrong type is named by path" "$(head -c 300 "$T/bad2.err")"
grep -q 'bad3.json: .*private_upstream' "$T/bad3.err" && ok "an unknown top-level key is named" ||
	not_ok "an unknown top-level key is named" "$(head -c 300 "$T/bad3.err")"
if [ "$(cat "$T/bad1.out")" != 200 ]; then ok "a gateway whose config is bad serves no call"
else not_ok "a gateway whose config is bad serves no call" "got 200"; fi
policy_variant default "$T/badpol.json" badpol 'p["network"] = {"mode": "none", "connectors": ["echo"]}'
run_rbx policy validate "$T/badpol.json"
case $ERR$OUT in *network.connectors*gateway*) ok "a policy granting connectors without gateway mode is refused, naming network.connectors" ;;
*) not_ok "a policy granting connectors without gateway mode is refused" "exit $RC: $(first_line "$ERR$OUT")" ;; esac
policy_variant default "$T/badpol2.json" badpol2 'p["network"] = {"mode": "gateway", "connectors": ["Echo/.."]}'
run_rbx policy validate "$T/badpol2.json"
case $ERR$OUT in *'network.connectors[0]'*) ok "a bad connector name in a policy is named by path" ;;
*) not_ok "a bad connector name in a policy is named by path" "exit $RC: $(first_line "$ERR$OUT")" ;; esac
run_rbx policy validate "$T/pol.json"
[ "$RC" = 0 ] && ok "control: the test's policy with connectors validates" || not_ok "control: the test's policy validates" "$(first_line "$ERR$OUT")"

# ---------------------------------------------------------------------------------------
# 5. The installing proxy: pip downloads from an index (on host 127.0.0.1, reached by the name
# localhost, which the gateway resolves) the policy allows, and not from one it does not.
"$PY" "$FIX/index.py" "$T/iport" "$T/index.log" 2>"$T/ix.err" &
IX_PID=$!
"$PY" "$FIX/index.py" "$T/iport2" "$T/index2.log" 2>"$T/ix2.err" &
IX2_PID=$!
trap 'kill $IX_PID $IX2_PID 2>/dev/null; gw_cleanup' EXIT
for _ in $(seq 50); do [ -s "$T/iport" ] && [ -s "$T/iport2" ] && break; sleep 0.1; done
IP1=$(cat "$T/iport") IP2=$(cat "$T/iport2")
touch "$T/index.log" "$T/index2.log"
policy_variant default "$T/polp.json" gwproxy "p[\"network\"] = {\"mode\": \"gateway\", \"proxy\": [\"localhost:$IP1\"]}"
PIP='cd /tmp && python3 -m pip download --disable-pip-version-check --no-cache-dir --no-deps --retries 0 --timeout 10 -d /tmp/dl'
run_rbx run --image host --policy "$T/polp.json" --gateway-config "$T/gw.json" --timeout 120s -- /bin/sh -c \
	"$PIP --index-url http://localhost:$IP1/simple rbxpkg && ls /tmp/dl"
if [ "$RC" = 0 ] && grep -q 'rbxpkg-1.0-py3-none-any.whl' "$T/out" && grep -q '^GET /files/rbxpkg' "$T/index.log"; then
	ok "pip download through the proxy from an index the policy allows succeeds (the index served the wheel)"
else not_ok "pip download through the proxy from an allowed index succeeds" "exit $RC: $(tail -n 3 "$T/out" | tr '\n' ' ') $(first_line "$ERR")"; fi
grep -q "gateway refused" "$T/err" && not_ok "control: no hint when the proxy allowed everything" "$(first_line "$ERR")" ||
	ok "control: no hint when the proxy allowed everything"
run_rbx run --image host --policy "$T/polp.json" --gateway-config "$T/gw.json" --timeout 120s -- /bin/sh -c \
	"$PIP --index-url http://localhost:$IP2/simple rbxpkg"
if [ "$RC" != 0 ] && [ ! -s "$T/index2.log" ] && grep -q "gateway refused GET localhost:$IP2 (rule network.proxy)" "$T/err"; then
	ok "pip download from an index the policy does not allow fails, with the hint on stderr, and the index got nothing"
else not_ok "pip download from a disallowed index fails with the hint" "exit $RC, index2: $(head -c 100 "$T/index2.log"), stderr: $(first_line "$ERR")"; fi
n=$("$PY" - "$STATE/ledger.db" "$IP2" <<'PYEOF'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(sum(1 for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call'")
          if json.loads(d).get("door") == "proxy" and json.loads(d).get("connector") == "localhost:" + sys.argv[2]
          and json.loads(d).get("status") == 403 and json.loads(d).get("rule") == "network.proxy"))
PYEOF
)
[ "${n:-0}" -ge 1 ] && ok "the refused proxy request is a gateway_call ledger event (door proxy, rule network.proxy)" ||
	not_ok "the refused proxy request is in the ledger" "$n events"

# The same index by IP literal, without the run token, and on a name whose address the gateway
# config does not name: all refused; control: by its allowed name, through the same proxy.
: >"$T/index.log"
run_rbx run --image host --policy "$T/polp.json" --gateway-config "$T/gw.json" -- /bin/sh -c "
c() { curl -s -o /dev/null -w '%{http_code} ' --noproxy '' \"\$@\"; }
c -x \"\$HTTP_PROXY\" 'http://localhost:$IP1/simple/rbxpkg/?rbx=1&x=%41'
c -x \"\$HTTP_PROXY\" http://127.0.0.1:$IP1/simple/rbxpkg/
c -x \"\$HTTP_PROXY\" http://localhost:$((IP1 == 65535 ? 1 : IP1 + 1))/simple/rbxpkg/
c -x \"http://127.0.0.1:\${HTTP_PROXY##*:}\" http://localhost:$IP1/simple/rbxpkg/
curl -s -o /dev/null -w '%{http_connect} ' --noproxy '' -p -x \"\$HTTP_PROXY\" http://localhost:$((IP1 == 65535 ? 1 : IP1 + 1))/simple/rbxpkg/
c -p -x \"\$HTTP_PROXY\" http://localhost:$IP1/simple/rbxpkg/; echo"
set -- $OUT
[ "${1:-}" = 200 ] && ok "control: the allowed name through the proxy answers 200" || not_ok "control: the allowed name through the proxy answers 200" "$OUT $(first_line "$ERR")"
[ "${2:-}" = 403 ] && ok "an IP literal no proxy entry names is refused (403)" || not_ok "an IP literal no proxy entry names is refused" "$OUT"
[ "${3:-}" = 403 ] && ok "another port of an allowed name is refused (403)" || not_ok "another port of an allowed name is refused" "$OUT"
[ "${4:-}" = 407 ] && ok "the proxy without the run token is 407" || not_ok "the proxy without the run token is 407" "$OUT"
[ "${5:-}" = 403 ] && ok "a CONNECT tunnel to a port off the allowlist is refused (403)" || not_ok "a CONNECT tunnel off the allowlist is refused" "$OUT"
[ "${6:-}" = 200 ] && ok "control: a CONNECT tunnel to the allowed name and port carries the request (200)" || not_ok "control: an allowed CONNECT tunnel carries the request" "$OUT"
n=$(grep -c . "$T/index.log")
[ "$n" = 2 ] && ok "only the allowed requests (absolute form and tunnelled) reached the index" || not_ok "only the allowed request reached the index" "$n requests: $(head -c 200 "$T/index.log")"
grep -qx 'GET /simple/rbxpkg/?rbx=1&x=A' "$T/index.log" && ok "an absolute-form request's query reaches the upstream (in one spelling: %41 as A)" ||
	not_ok "the proxy forwards the query" "$(head -c 200 "$T/index.log")"
run_rbx run --image host --policy "$T/polp.json" --gateway-config "$T/gw-nopriv.json" -- /bin/sh -c \
	"curl -s -w ' %{http_code}' --noproxy '' -x \"\$HTTP_PROXY\" http://localhost:$IP1/simple/rbxpkg/"
case $OUT in *'"rule":"address"'*" 403") ok "a name resolving to loopback is refused when private_upstreams does not name the address" ;;
*) not_ok "a name resolving to loopback is refused without private_upstreams" "$OUT" ;; esac
run_rbx run --image host --policy "$T/pol.json" --gateway-config "$T/gw.json" -- /bin/sh -c 'env | grep -ci proxy'
[ "$OUT" = 0 ] && ok "control: a policy with no network.proxy puts no proxy variables in the step's environment" ||
	not_ok "control: no proxy variables without network.proxy" "$OUT"
policy_variant default "$T/badpol3.json" badpol3 'p["network"] = {"mode": "gateway", "proxy": ["pypi.org"]}'
run_rbx policy validate "$T/badpol3.json"
case $ERR$OUT in *'network.proxy[0]'*) ok "a proxy entry without a port is refused, named by path" ;;
*) not_ok "a proxy entry without a port is refused" "exit $RC: $(first_line "$ERR$OUT")" ;; esac
