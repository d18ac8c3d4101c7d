#!/usr/bin/env bash
# Approvals on runbox serve's API: GET /v1/approvals lists the connector calls held in the
# daemon's live runs, POST /v1/approvals/ID/approve|deny decides one, as `runbox approve|deny`
# does. Over TCP a key sees and decides its tenant's calls only: tenant B's key lists none of
# A's held call and its approve is 404 with nothing reaching the upstream (control: A's key
# lists it and its approve releases the call, which then reaches the upstream once); deny
# answers the held call 403 (nothing upstream); the unix socket (the operator) lists all.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init serve_approvals
command -v curl >/dev/null || { skip "serve approvals" "curl missing"; exit 0; }

FIX=$ROOT/tests/integration/fixtures/gateway
UP_PID="" BG="" DPID=""
sa_cleanup() {
	[ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null
	[ -n "$BG" ] && kill "$BG" 2>/dev/null
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null
	lib_cleanup
}
trap sa_cleanup EXIT
OWNER=0
[ "$MODE" = root ] || OWNER=$NOBODY
serve_client
"$PY" "$FIX/upstream.py" "$T/port" "$T/up.log" 2>"$T/up.err" &
UP_PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
UPORT=$(cat "$T/port" 2>/dev/null)
[ -n "$UPORT" ] || { not_ok "upstream starts" "$(cat "$T/up.err")"; exit 0; }
: >"$T/up.log"
chmod a+rw "$T/up.log"
printf 'rbxsaprcred%s\n' "$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')" >"$T/cred"
chmod 0600 "$T/cred" && chown $OWNER "$T/cred"
"$PY" - "$T/gw.json" "$UPORT" "$T/cred" <<'PYEOF'
import json, sys
f, port, cred = sys.argv[1:]
r = [{"methods": ["POST"], "paths": ["/v1/*"]}]
c = {"url": "http://127.0.0.1:%s" % port, "credential": {"file": cred}, "inject": "bearer", "routes": r}
json.dump({"connectors": {"pay": c}, "private_upstreams": ["127.0.0.1"]}, open(f, "w"))
PYEOF
chmod a+r "$T/gw.json"
policy_variant default "$T/pol.json" saprove \
	"p['network'] = {'mode': 'gateway', 'connectors': ['pay'], 'approval': [{'connector': 'pay', 'methods': ['POST'], 'timeout_s': 120}]}"

PORT=$((20000 + RANDOM % 20000))
KA=ka-$RANDOM$RANDOM$RANDOM-key-of-tenant-a
KB=kb-$RANDOM$RANDOM$RANDOM-key-of-tenant-b
serve_keys "$(printf '{"%s": {"tenant": "ta"}, "%s": {"tenant": "tb"}}' "$KA" "$KB")"
serve_start serve.log --listen "127.0.0.1:$PORT" --keys "$T/keys.json" || exit 0

n_pending() { "$PY" -c 'import json,sys; print(len(json.loads(sys.argv[1])["approvals"]))' "$R" 2>/dev/null; }
hits() { grep -c "case=$1\"" "$T/up.log"; }
# held_run CASE: tenant ta's run holding a POST (the result in $T/held.out), in the background.
held_run() {
	rbx_cmd run --image host --json --tenant ta --policy "$T/pol.json" --gateway-config "$T/gw.json" --timeout 90s \
		--input "$FIX/held.py:/workspace/in/held.py" -- \
		/usr/bin/python3 /workspace/in/held.py "/v1/connectors/pay/v1/pay?case=$1" - "amount=7" 0
	"${RBX_CMD[@]}" </dev/null >"$T/held.out" 2>"$T/held.err" &
	BG=$!
}
first() { "$PY" -c 'import json,sys; print(json.loads(json.load(open(sys.argv[1]))["stdout"])["first"][0])' "$T/held.out" 2>/dev/null; }

held_run sapr
for _ in $(seq 300); do
	tcp "$KA" GET /v1/approvals
	[ "$(n_pending)" = 1 ] && break
	sleep 0.2
done
RA=$R
ID=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["approvals"][0]["id"])' "$RA" 2>/dev/null)
tcp "$KB" GET /v1/approvals
if [ -n "$ID" ] && [ "$ST" = 200 ] && [ "$(n_pending)" = 0 ]; then
	ok "GET /v1/approvals: tenant A's key lists its held call ($ID), tenant B's lists none"
else
	not_ok "GET /v1/approvals is tenant-bound" "A: $RA; B: $ST $R"
fi
api GET /v1/approvals
[ "$(n_pending)" = 1 ] && ok "the unix socket (the operator) lists every tenant's held call" || not_ok "the operator lists the held call" "$ST $R"
tcp "$KB" POST "/v1/approvals/$ID/approve"
stb=$ST
sleep 1
tcp "$KA" GET /v1/approvals
if [ "$stb" = 404 ] && [ "$(hits sapr)" = 0 ] && [ "$(n_pending)" = 1 ]; then
	ok "tenant B's key cannot approve tenant A's call (404; still held, nothing upstream)"
else
	not_ok "tenant B's key cannot approve tenant A's call" "B's approve $stb, hits $(hits sapr), A sees $R"
fi
tcp "$KA" POST "/v1/approvals/$ID/approve"
sta=$ST ra=$R
wait "$BG"
BG=""
if [ "$sta" = 200 ] && [ "$(first)" = 200 ] && [ "$(hits sapr)" = 1 ]; then
	ok "tenant A's key approves its call over the API: it proceeds, once upstream ($ra)"
else
	not_ok "tenant A's key approves its call" "approve $sta $ra; the call got $(first), hits $(hits sapr): $(head -c 300 "$T/held.err")"
fi
tcp "$KA" POST "/v1/approvals/$ID/deny"
[ "$ST" = 404 ] || [ "$ST" = 409 ] && ok "a decided call (its run ended) takes no second decision ($ST)" || not_ok "a decided call takes no second decision" "$ST $R"

held_run sdny
for _ in $(seq 300); do
	tcp "$KA" GET /v1/approvals
	[ "$(n_pending)" = 1 ] && break
	sleep 0.2
done
ID2=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])["approvals"][0]["id"])' "$R" 2>/dev/null)
tcp "$KA" POST "/v1/approvals/$ID2/deny"
std=$ST
wait "$BG"
BG=""
if [ "$std" = 200 ] && [ "$(first)" = 403 ] && [ "$(hits sdny)" = 0 ]; then
	ok "POST /v1/approvals/ID/deny refuses the held call (403, nothing upstream)"
else
	not_ok "POST /v1/approvals/ID/deny refuses the held call" "deny $std; the call got $(first), hits $(hits sdny)"
fi
tcp "$KA" GET /v1/approvals/x
[ "$ST" = 404 ] && ok "an unknown approvals path is 404" || not_ok "an unknown approvals path is 404" "$ST"
