#!/usr/bin/env bash
# Approvals and idempotent retries, one mechanism: an approval-gated POST waits and reaches the
# upstream (on host 127.0.0.1, counting hits) only after `runbox approve` (0 hits before, 1
# after), its retry gets 409 while it is held and the single result once approved; `runbox deny`
# and the rule's timeout give 403 and nothing upstream; a retried POST with the same
# Idempotency-Key reaches the upstream once (another payload 422), one sent and lost to the
# connector's timeout is never re-sent; controls: calls without a key or rule reach the
# upstream each time, and a GET the rule does not name is not held.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init gwapproval

FIX=$ROOT/tests/integration/fixtures/gateway
UP_PID="" BG=""
ap_cleanup() {
	[ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null
	[ -n "$BG" ] && kill "$BG" 2>/dev/null
	lib_cleanup
}
trap ap_cleanup EXIT
OWNER=0
[ "$MODE" = root ] || OWNER=$NOBODY
"$PY" "$FIX/upstream.py" "$T/port" "$T/up.log" 2>"$T/up.err" &
UP_PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port" 2>/dev/null)
[ -n "$PORT" ] || { not_ok "upstream starts" "$(cat "$T/up.err")"; exit 0; }
: >"$T/up.log"
chmod a+rw "$T/up.log"
printf 'rbxapprovalcred%s\n' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" >"$T/cred"
chmod 0600 "$T/cred" && chown $OWNER "$T/cred"
"$PY" - "$T/gw.json" "$PORT" "$T/cred" <<'PYEOF'
import json, sys
f, port, cred = sys.argv[1:]
r = [{"methods": ["GET", "POST"], "paths": ["/v1/*"]}]
c = {"url": "http://127.0.0.1:%s" % port, "credential": {"file": cred}, "inject": "bearer", "routes": r, "timeout_s": 1}
json.dump({"connectors": {"pay": c, "echo": c}, "private_upstreams": ["127.0.0.1"]}, open(f, "w"))
PYEOF
chmod a+r "$T/gw.json"
policy_variant default "$T/pol.json" gwapproval \
	"p['network'] = {'mode': 'gateway', 'connectors': ['pay', 'echo'], 'approval': [{'connector': 'pay', 'methods': ['post'], 'timeout_s': 120}]}"
policy_variant default "$T/pol1.json" gwapproval1 \
	"p['network'] = {'mode': 'gateway', 'connectors': ['pay'], 'approval': [{'connector': 'pay', 'methods': ['POST'], 'timeout_s': 1}]}"

# hits CASE: requests the upstream got for ?case=CASE.
hits() { grep -c "case=$1\"" "$T/up.log"; }
# held_run POLICY CASE KEY [LINGER]: the held client in a step, in the background; the result in
# $T/held.out. The client retries 1.5 s after its first call.
held_run() {
	rbx_cmd run --image host --json --policy "$1" --gateway-config "$T/gw.json" --timeout 90s \
		--input "$FIX/held.py:/workspace/in/held.py" -- \
		/usr/bin/python3 /workspace/in/held.py "/v1/connectors/pay/v1/pay?case=$2" "$3" "amount=42" "${4:-0}"
	"${RBX_CMD[@]}" </dev/null >"$T/held.out" 2>"$T/held.err" &
	BG=$!
}
# pending: the held calls `runbox approve` lists, as JSON; waits up to 60 s for one.
pending() {
	for _ in $(seq 600); do
		run_rbx approve
		[ "$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$T/out" 2>/dev/null)" -ge 1 ] 2>/dev/null && break
		sleep 0.1
	done
	cp "$T/out" "$T/pending.json"
	sleep 3 # the client's retry (1.5 s after its call) meets the call while it is held
}
# got KEY: the held client's [status, body, replayed] for first, during or after.
got() { "$PY" -c 'import json,sys; print(json.dumps(json.loads(json.load(open(sys.argv[1]))["stdout"])[sys.argv[2]]))' "$T/held.out" "$1" 2>/dev/null; }

# ---------------------------------------------------------------------------------------
# 1. Held, then approved.
held_run "$T/pol.json" apr -
pending
ID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["id"])' "$T/pending.json" 2>/dev/null)
[ "$(hits apr)" = 0 ] && [ -n "$ID" ] && ok "the approval-gated POST is held: listed by \`runbox approve\` ($ID), 0 upstream hits" ||
	not_ok "the approval-gated POST is held" "id ${ID:-none}, hits $(hits apr): $(head -c 300 "$T/pending.json")"
"$PY" - "$T/pending.json" "$T/cred" "$PORT" <<'PYEOF' | report "$(cat)"
import json, sys
r = json.load(open(sys.argv[1]))[0]
cred = open(sys.argv[2]).read().strip()
want = {"connector": "pay", "method": "POST", "effect": "POST pay/v1/pay", "target": "127.0.0.1:" + sys.argv[3],
        "credential_scope": "pay", "tenant": r.get("tenant"),
        # What the approver reads is what will be sent: the query and the body's first bytes.
        "query": "?case=apr", "body_bytes": 9, "body_excerpt": "amount=42"}
bad = [k for k, v in want.items() if r.get(k) != v]
bad += [k for k in ("args_digest", "policy_result", "tenant", "run", "expires") if not r.get(k)]
bad += ["args_digest not sha256 hex"] if len(r.get("args_digest", "")) != 64 else []
bad += ["the credential is in the request"] if cred in json.dumps(r) else []
print("ok\tthe request records effect, query, body (size, first bytes), args digest, target, tenant, policy result and the credential's scope by name (not its value)" if not bad
      else "not_ok\tthe approval request's fields\t%s: %s" % (bad, json.dumps(r)[:300]))
PYEOF
run_rbx approve "$ID"
[ "$RC" = 0 ] && ok "runbox approve ID releases it" || not_ok "runbox approve ID" "exit $RC: $(first_line "$ERR")"
wait "$BG"
BG=""
case "$(got first)" in '[200, "reached /v1/pay"'*) ok "the held POST proceeds after approve and gets the upstream's answer" ;;
*) not_ok "the held POST proceeds after approve" "$(got first) $(first_line "$(cat "$T/held.err")")" ;; esac
case "$(got during)" in '[409, '*held\ for\ approval*) ok "its retry while held gets 409 (held for approval)" ;;
*) not_ok "the retry while held gets 409" "$(got during)" ;; esac
case "$(got after)" in '[200, "reached /v1/pay", "true"]') ok "its retry after approval gets the single result, replayed" ;;
*) not_ok "the retry after approval replays the result" "$(got after)" ;; esac
[ "$(hits apr)" = 1 ] && ok "the upstream got the held POST exactly once (0 before approve)" || not_ok "the upstream got the held POST once" "$(hits apr) hits"
n=$("$PY" - "$STATE/ledger.db" "$ID" <<'PYEOF'
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
ev = [json.loads(d) for (d,) in db.execute("SELECT data FROM events WHERE type='gateway_call'")]
req = [e for e in ev if (e.get("approval") or {}).get("state") == "requested" and e["approval"]["request"]["id"] == sys.argv[2]]
done = [e for e in ev if (e.get("approval") or {}).get("id") == sys.argv[2] and e["approval"]["state"] == "approved" and e["status"] == 200]
print(len(req), len(done))
PYEOF
)
[ "$n" = "1 1" ] && ok "the ledger has the approval request and the approved call (gateway_call events)" || not_ok "the approval is in the ledger" "$n"

# ---------------------------------------------------------------------------------------
# 2. Held, then denied; and held until the rule's timeout.
held_run "$T/pol.json" deny - 15
pending
ID=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["id"])' "$T/pending.json" 2>/dev/null)
run_rbx deny "$ID"
run_rbx approve "$ID" # the run lingers: the call is still there, decided
case $RC$ERR in 125*"already decided: denied"*) ok "a second decision on the same call is refused, naming the first" ;;
*) not_ok "a second decision is refused" "exit $RC: $(first_line "$ERR")" ;; esac
wait "$BG"
BG=""
case "$(got first)" in '[403, '*'"rule": "approval"'*|'[403, '*'\"rule\":\"approval\"'*) ok "runbox deny gives the held POST a 403 (rule approval)" ;;
*) not_ok "runbox deny gives 403" "$(got first)" ;; esac
case "$(got during) $(got after)" in '[409, '*'[403, '*) ok "its retry gets 409 while held and 403 once denied" ;;
*) not_ok "the retries of a denied call" "$(got during) $(got after)" ;; esac
[ "$(hits deny)" = 0 ] && ok "the denied POST never reached the upstream" || not_ok "the denied POST never reached the upstream" "$(hits deny)"
held_run "$T/pol1.json" expire -
wait "$BG"
BG=""
case "$(got first)" in '[403, '*"no decision within 1 s"*) ok "a held POST with no decision is denied at the rule's timeout" ;;
*) not_ok "a held POST times out denied" "$(got first)" ;; esac
[ "$(hits expire)" = 0 ] && ok "the timed-out POST never reached the upstream" || not_ok "the timed-out POST never reached the upstream" "$(hits expire)"

# ---------------------------------------------------------------------------------------
# 3. Idempotency-Key on a connector the rule does not hold (echo), and a GET on the held one.
printf '%s' '[
 {"name": "k1", "method": "POST", "path": "/v1/connectors/echo/v1/once?case=idem", "body": "a", "headers": {"Idempotency-Key": "k-1"}},
 {"name": "k1again", "method": "POST", "path": "/v1/connectors/echo/v1/once?case=idem", "body": "a", "headers": {"Idempotency-Key": "k-1"}},
 {"name": "k1other", "method": "POST", "path": "/v1/connectors/echo/v1/once?case=idem", "body": "b", "headers": {"Idempotency-Key": "k-1"}},
 {"name": "slow", "method": "POST", "path": "/v1/connectors/echo/v1/slow?case=slow", "body": "s", "headers": {"Idempotency-Key": "k-2"}},
 {"name": "slowagain", "method": "POST", "path": "/v1/connectors/echo/v1/slow?case=slow", "body": "s", "headers": {"Idempotency-Key": "k-2"}},
 {"name": "nokey", "method": "POST", "path": "/v1/connectors/echo/v1/once?case=nokey", "body": "a"},
 {"name": "nokey2", "method": "POST", "path": "/v1/connectors/echo/v1/once?case=nokey", "body": "a"},
 {"name": "get", "path": "/v1/connectors/pay/v1/once?case=get"}]' >"$T/spec.json"
chmod a+r "$T/spec.json"
run_rbx run --image host --json --policy "$T/pol.json" --gateway-config "$T/gw.json" --timeout 60s \
	--input "$FIX/client.py:/workspace/in/client.py" --input "$T/spec.json:/workspace/in/spec.json" -- \
	/usr/bin/python3 /workspace/in/client.py /workspace/in/spec.json
json "$T/out" stdout >"$T/client.json" 2>/dev/null
st() { "$PY" -c 'import json,sys; print(*[c.get("status", c.get("exception")) for c in json.load(open(sys.argv[1]))["calls"]])' "$T/client.json" 2>/dev/null; }
set -- $(st)
[ "${1:-} ${2:-}" = "200 200" ] && [ "$(hits idem)" = 1 ] && ok "a retried POST with the same Idempotency-Key reaches the upstream once; both get 200" ||
	not_ok "a retried POST with the same key reaches the upstream once" "statuses $*, hits $(hits idem)"
[ "${3:-}" = 422 ] && ok "the same key with another payload is 422" || not_ok "the same key with another payload is 422" "${3:-}"
[ "${4:-} ${5:-}" = "502 409" ] && [ "$(hits slow)" = 1 ] && ok "a POST sent and lost to the connector's timeout is recorded unknown; its retry is 409 and never re-sent" ||
	not_ok "a sent-and-lost POST is never re-sent" "statuses ${4:-} ${5:-}, hits $(hits slow)"
[ "${6:-} ${7:-}" = "200 200" ] && [ "$(hits nokey)" = 2 ] && ok "control: the same POST without a key reaches the upstream each time" ||
	not_ok "control: POSTs without a key each reach the upstream" "${6:-} ${7:-}, hits $(hits nokey)"
[ "${8:-}" = 200 ] && [ "$(hits get)" = 1 ] && ok "control: a GET on the held connector (the rule names POST) is not held" ||
	not_ok "control: a GET the rule does not name is not held" "${8:-}, hits $(hits get)"

# ---------------------------------------------------------------------------------------
# 4. The policy's shape: errors named by JSON path; control: the test's policy validates.
policy_variant default "$T/bad1.json" bad1 "p['network'] = {'mode': 'none', 'approval': [{'connector': 'pay', 'methods': ['POST']}]}"
policy_variant default "$T/bad2.json" bad2 "p['network'] = {'mode': 'gateway', 'approval': [{'connector': 'pay', 'methods': 'POST'}]}"
policy_variant default "$T/bad3.json" bad3 "p['network'] = {'mode': 'gateway', 'approval': [{'connector': 'pay', 'methods': ['POST'], 'timeout_s': 0}]}"
for i in 1 2 3; do run_rbx policy validate "$T/bad$i.json"; cp "$T/err" "$T/bad$i.err"; cat "$T/out" >>"$T/bad$i.err"; done
grep -q 'network.approval.*gateway' "$T/bad1.err" && grep -q 'network.approval\[0\].methods' "$T/bad2.err" &&
	grep -q 'network.approval\[0\].timeout_s' "$T/bad3.err" && ok "bad approval rules are refused, named by JSON path" ||
	not_ok "bad approval rules are refused by path" "$(cat "$T"/bad*.err | head -c 300)"
run_rbx policy validate "$T/pol.json"
[ "$RC" = 0 ] && ok "control: the test's policy with approval rules validates" || not_ok "control: the approval policy validates" "$(first_line "$ERR$OUT")"
