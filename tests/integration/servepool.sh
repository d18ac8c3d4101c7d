#!/usr/bin/env bash
# runbox serve's warm pool, group commit, quotas, labels, lifetime, limits and TCP keys
# (docs/serve.md), each against a control: a pooled create is bound to its owner only at the
# claim (a waiting member's state names nobody) and holds nothing of another session; two
# claims get two sandboxes; the pool refills; a pair not pooled (or a create asking for limits)
# is made cold; the claim is in the ledger. Calls queued while the ledger is held are answered
# only after it, sharing commits. Quotas are 429s; labels, limits and lifetime are recorded; a
# TCP key sees only its tenant's sessions.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init servepool

serve_client
PORT=$((20000 + RANDOM % 20000))
KA=ka-$RANDOM$RANDOM$RANDOM-key-of-tenant-a
KB=kb-$RANDOM$RANDOM$RANDOM-key-of-tenant-b

# run_in SID CMD: runs sh -c CMD in the session, waits, sets OUTP to its stdout.
run_in() {
	api POST "/v1/sessions/$1/processes" "$("$PY" -c 'import json,sys; print(json.dumps({"argv": ["sh", "-c", sys.argv[1]]}))' "$2")"
	local p
	p=$(jv 'r["id"]')
	api GET "/v1/sessions/$1/processes/$p/output?wait_ms=20000"
	OUTP=$(jv '"".join(c["data"] for c in r["chunks"] if c["stream"] == "stdout")')
}
pool_ready() {
	api GET /v1/stats
	[ "$(jv 'r["pool"][0]["ready"]')" = "$1" ]
}
state_of() { # the state file of run $1
	find "$STATE" -name "$1.state" 2>/dev/null | head -n 1
}

KC=kc-$MARK-0123456789abcdef
serve_keys "$(printf '{"%s": {"tenant": "ta"}, "%s": {"tenant": "tb"}, "%s": {"tenant": "tc", "policies": ["strict"], "images": ["minimal"]}}' \
	"$KA" "$KB" "$KC")"

# A key file others may read is refused, and the daemon does not start.
cp "$T/keys.json" "$T/keys-open.json"
chmod 0644 "$T/keys-open.json"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/keys-open.json"
run_rbx serve --socket "$T/xdg/open.sock" --listen "127.0.0.1:$PORT" --keys "$T/keys-open.json"
if [ "$RC" = 125 ] && [[ "$ERR" == *"mode 0600"* ]] && [ ! -e "$T/xdg/open.sock" ]; then ok "a key file of mode 0644 is refused (125, naming the mode)"
else not_ok "a key file of mode 0644 is refused (125, naming the mode)" "exit $RC, $(first_line "$ERR")"; fi
run_rbx serve --socket "$T/xdg/open.sock" --listen "0.0.0.0:$PORT" --keys "$T/keys.json"
if [ "$RC" = 125 ] && [[ "$ERR" == *"loopback"* ]]; then ok "--listen on a non-loopback address is refused"
else not_ok "--listen on a non-loopback address is refused" "exit $RC, $(first_line "$ERR")"; fi

GROUP_ARGS=()
if [ "$MODE" = root ]; then
	# The group's socket lives in a directory others may search, so the mode bits decide.
	mkdir -p "$T/gsock"
	chmod 0711 "$T/gsock"
	SOCK=$T/gsock/serve.sock
	GROUP_ARGS=(--group "$(getent group $NOBODY | cut -d: -f1)")
fi
serve_start serve.log --pool minimal:default=2 --max-sessions 8 --max-sessions-per-tenant 2 \
	--listen "127.0.0.1:$PORT" --keys "$T/keys.json" "${GROUP_ARGS[@]}" || exit 0
ok "runbox serve --pool --listen --keys listens on $SOCK and 127.0.0.1:$PORT"

if [ "$MODE" = root ]; then
	st=$(stat -c '%a %G' "$SOCK")
	in_group=$(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://runbox/v1/sessions)
	other=$(setpriv --reuid=$NOBODY --regid=12345 --clear-groups curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://runbox/v1/sessions)
	if [ "$st" = "660 $(getent group $NOBODY | cut -d: -f1)" ] && [ "$in_group" = 200 ] && [ "$other" = 000 ]; then
		ok "--group: the socket is 0660 of that group; a member connects, another user cannot"
	else not_ok "--group: the socket is 0660 of that group; a member connects, another user cannot" "$st, member $in_group, other $other"; fi
fi

# The pool fills, and a waiting member's state names no owner.
if wait_for pool_ready 2 || wait_for pool_ready 2; then ok "the pool fills to its size (2)"
else not_ok "the pool fills to its size (2)" "$R"; fi
owners=$(find "$STATE" -name '*.state' -exec "$PY" -c 'import json,sys; [print(repr((json.load(open(f)).get("tenant"), json.load(open(f)).get("agent")))) for f in sys.argv[1:]]' {} + | sort -u)
if [ "$owners" = "('', '')" ]; then ok "a waiting member's state names no tenant and no agent"
else not_ok "a waiting member's state names no tenant and no agent" "$owners"; fi

MARK=$(new_marker)
api POST /v1/sessions "{\"image\": \"minimal\", \"tenant\": \"ta\", \"agent\": \"ag\", \"agent_version\": \"1.2\", \"labels\": {\"team\": \"red\"}, \"env\": {\"SECRET_A\": \"a-$MARK\"}}"
A=$(jv 'r["id"]')
a_pooled=$(jv 'r["pooled"]')
A_RUN=$(jv 'r["run_id"]')
api POST /v1/sessions '{"image": "minimal", "tenant": "tb"}'
B=$(jv 'r["id"]')
b_pooled=$(jv 'r["pooled"]')
B_RUN=$(jv 'r["run_id"]')
if [ "$a_pooled" = true ] && [ "$b_pooled" = true ]; then ok "a create of the pooled pair takes a member (pooled: true)"
else not_ok "a create of the pooled pair takes a member (pooled: true)" "A $a_pooled, B $b_pooled"; fi
a_state=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["tenant"], d["agent"])' "$(state_of "$A_RUN")" 2>/dev/null)
if [ "$a_state" = "ta ag" ]; then ok "control: the claimed member's state names its owner now"
else not_ok "control: the claimed member's state names its owner now" "'$a_state'"; fi

run_in "$A" "echo a-file-$MARK > /workspace/mine; echo \"\$SECRET_A\"; printf %s \"\$RUNBOX_TOKEN\" | sha256sum"
a_out=$OUTP
run_in "$B" "echo pid=\$\$; cat /workspace/mine 2>&1; env; printf %s \"\$RUNBOX_TOKEN\" | sha256sum"
b_out=$OUTP
# Never used before its claim: B's first process is the first its sandbox ever started (pid 2,
# after init); control: a second process in A, whose first one ran, is not.
run_in "$A" 'echo pid=$$'
a_again=$OUTP
if [[ "$b_out" == "pid=2"$'\n'* ]] && [[ "$a_again" == pid=* ]] && [ "$a_again" != pid=2 ]; then
	ok "a claimed member never ran a process before its claim (its first is pid 2); control: a used one's next is not"
else not_ok "a claimed member never ran a process before its claim" "B '$(first_line "$b_out")', A again '$a_again'"; fi
a_tok=$(printf '%s' "$a_out" | tail -n 1)
b_tok=$(printf '%s' "$b_out" | tail -n 1)
empty=$(printf '' | sha256sum)
if [[ "$a_out" == *"a-$MARK"* ]] && [[ "$b_out" != *"$MARK"* ]] && [[ "$b_out" != *SECRET_A* ]] && [[ "$b_out" == *"No such file"* ]]; then
	ok "a pooled session holds nothing of another: neither its env nor its /workspace"
else not_ok "a pooled session holds nothing of another: neither its env nor its /workspace" "A '$(first_line "$a_out")', B '$(printf '%s' "$b_out" | tr '\n' ' ' | cut -c1-200)'"; fi
if [ -n "$a_tok" ] && [ "$a_tok" != "$empty" ] && [ "$b_tok" != "$empty" ] && [ "$a_tok" != "$b_tok" ]; then
	ok "each pooled session got its own run token at its claim"
else not_ok "each pooled session got its own run token at its claim" "A $a_tok, B $b_tok"; fi
pa=$(sed -n "s/.*session $A opened: run [^,]*, init pid \([0-9]*\).*/\1/p" "$T/serve.log")
pb=$(sed -n "s/.*session $B opened: run [^,]*, init pid \([0-9]*\).*/\1/p" "$T/serve.log")
if [ -n "$pa" ] && [ -n "$pb" ] && [ "$pa" != "$pb" ] && [ "$A_RUN" != "$B_RUN" ]; then ok "two claims get two sandboxes (init pids $pa, $pb; two runs)"
else not_ok "two claims get two sandboxes" "pids '$pa' '$pb', runs $A_RUN $B_RUN"; fi

if wait_for pool_ready 2 || wait_for pool_ready 2; then
	made=$(jv 'r["pool"][0]["made"]')
	claimed=$(jv 'r["pool"][0]["claimed"]')
	expired=$(jv 'r["pool"][0]["expired"]')
	if [ "$made" -ge 4 ] && [ "$claimed" = 2 ] && [ "$expired" = 0 ]; then ok "the pool is refilled after two claims (made $made, claimed $claimed)"
	else not_ok "the pool is refilled after two claims" "$R"; fi
else not_ok "the pool is refilled after two claims" "$R"; fi

api POST /v1/sessions '{"image": "minimal", "policy": "strict", "tenant": "tc"}'
C=$(jv 'r["id"]')
c_pooled=$(jv 'r["pooled"]')
C_RUN=$(jv 'r["run_id"]')
api POST /v1/sessions '{"image": "minimal", "tenant": "tc", "limits": {"memory": "256M", "pids": 64}}'
L=$(jv 'r["id"]')
l_pooled=$(jv 'r["pooled"]')
l_limits=$(jv '[r["limits"]["memory_bytes"], r["limits"]["pids"]]')
if [ "$c_pooled" = false ] && [ "$l_pooled" = false ]; then ok "control: a pair not pooled, and a create asking for limits, are made cold (pooled: false)"
else not_ok "control: a pair not pooled, and a create asking for limits, are made cold" "strict $c_pooled, limits $l_pooled"; fi
run_in "$L" "echo alive"
if [ "$l_limits" = "[268435456, 64]" ] && [ "$OUTP" = alive ]; then ok "limits below the policy's are taken (256M, 64 pids) and the session runs"
else not_ok "limits below the policy's are taken" "$l_limits, out '$OUTP'"; fi

run_rbx session create --socket "$SOCK" --image minimal --label team=blue --label tier=2 --max-lifetime 1h --memory 128M --pids 32
CLI_S=$OUT
api GET "/v1/sessions/$CLI_S"
cli=$(jv '[r["labels"], r["max_lifetime_ms"], r["limits"]["memory_bytes"], r["limits"]["pids"]]')
if [ "$RC" = 0 ] && [ "$cli" = '[{"team": "blue", "tier": "2"}, 3600000, 134217728, 32]' ]; then ok "session create --label --max-lifetime --memory --pids reach the session"
else not_ok "session create --label --max-lifetime --memory --pids reach the session" "exit $RC, $cli ($(first_line "$ERR"))"; fi
api DELETE "/v1/sessions/$CLI_S"
api POST /v1/sessions '{"image": "minimal", "limits": {"memory": "64G"}}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.limits'*64* ]] && [[ "$(jv 'r["error"]')" == *"policy \`default\`"* ]]; then
	ok "a limit above the policy's is a 400 naming both values"
else not_ok "a limit above the policy's is a 400 naming both values" "$ST $R"; fi
api POST /v1/sessions '{"image": "minimal", "limits": {"memoryx": 1}}'
e1="$ST $(jv 'r["error"]')"
api POST /v1/sessions '{"image": "minimal", "labels": {"a b": "x"}}'
e2="$ST $(jv 'r["error"]')"
api POST /v1/sessions '{"image": "minimal", "max_lifetime": "soon"}'
e3="$ST $(jv 'r["error"]')"
if [[ "$e1" == 400*'$.limits.memoryx'* ]] && [[ "$e2" == 400*'$.labels'* ]] && [[ "$e3" == 400*'$.max_lifetime'* ]]; then
	ok "bad limits, labels and max_lifetime are 400s naming the path"
else not_ok "bad limits, labels and max_lifetime are 400s naming the path" "$e1 | $e2 | $e3"; fi

# Handed out once, never returned: a deleted member's sandbox is gone and not claimed again.
api DELETE "/v1/sessions/$B"
gone=$(wait_for sh -c "! kill -0 $pb 2>/dev/null" && echo yes)
api POST /v1/sessions '{"image": "minimal", "tenant": "td"}'
D=$(jv 'r["id"]')
pd=$(sed -n "s/.*session $D opened: run [^,]*, init pid \([0-9]*\).*/\1/p" "$T/serve.log")
if [ "$gone" = yes ] && [ -n "$pd" ] && [ "$pd" != "$pb" ] && [ "$pd" != "$pa" ]; then ok "a deleted pooled session's sandbox is destroyed; the next claim is another (pid $pd)"
else not_ok "a deleted pooled session's sandbox is destroyed; the next claim is another" "gone '$gone', pids $pa $pb $pd"; fi
api DELETE "/v1/sessions/$D"

# Group commit: while another writer holds the ledger, eight process starts are all queued,
# none answered; once it lets go, each is answered, in fewer commits than eight. They keep
# running, so no step_end joins the count.
api GET /v1/stats
c0=$(jv 'r["ledger"]["commits"]')
e0=$(jv 'r["ledger"]["events"]')
"${CLIENT[@]}" "$PY" -c '
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
time.sleep(2)
c.execute("COMMIT")' "$STATE/ledger.db" "$T/xdg/held" &
HOLD=$!
wait_for test -e "$T/xdg/held"
CURLS=()
for i in 1 2 3 4 5 6 7 8; do
	("${CLIENT[@]}" curl -s -o "$T/gc.$i" -w '%{http_code} %{time_total}' --max-time 60 --unix-socket "$SOCK" \
		-X POST --data-binary "{\"argv\": [\"sh\", \"-c\", \"sleep 300; : gc-$i-$MARK\"]}" "http://runbox/v1/sessions/$A/processes" >"$T/gcst.$i") &
	CURLS+=($!)
done
sleep 1
early=$(cat "$T"/gcst.* 2>/dev/null | wc -c)
wait "$HOLD"
wait "${CURLS[@]}"
statuses=$(for f in "$T"/gcst.*; do cut -d' ' -f1 "$f"; done | sort | uniq -c | tr -s ' ')
api GET /v1/stats
c1=$(jv 'r["ledger"]["commits"]')
e1=$(jv 'r["ledger"]["events"]')
if [ "$early" = 0 ] && [ "$statuses" = " 8 201" ]; then ok "eight process starts while the ledger is held: none answered before it is free, all 201 after"
else not_ok "eight process starts while the ledger is held: none answered before it is free, all 201 after" "early bytes $early, statuses '$statuses'"; fi
if [ $((e1 - e0)) -ge 8 ] && [ $((c1 - c0)) -lt 8 ] && [ $((c1 - c0)) -ge 1 ]; then ok "their eight step_start events went in $((c1 - c0)) commits"
else not_ok "their eight step_start events went in fewer commits than eight" "commits $c0 -> $c1, events $e0 -> $e1"; fi

# Quotas: two sessions per tenant, eight in all.
api POST /v1/sessions '{"image": "minimal", "tenant": "tq"}'
q1=$ST
api POST /v1/sessions '{"image": "minimal", "tenant": "tq"}'
q2=$ST
api POST /v1/sessions '{"image": "minimal", "tenant": "tq"}'
q3="$ST $(jv 'r["error"]')"
api POST /v1/sessions '{"image": "minimal", "tenant": "tr"}'
q4=$ST
if [ "$q1/$q2" = 201/201 ] && [[ "$q3" == 429*"tenant \`tq\`"*per-tenant* ]] && [ "$q4" = 201 ]; then
	ok "a tenant's third session is a 429 naming the bound; another tenant's is taken"
else not_ok "a tenant's third session is a 429 naming the bound; another tenant's is taken" "$q1 $q2 | $q3 | $q4"; fi
api GET /v1/stats
n=$(jv 'r["sessions"]')
i=0
while [ "$n" -lt 8 ] && [ $i -lt 10 ]; do
	api POST /v1/sessions "{\"image\": \"minimal\", \"tenant\": \"fill$i\"}"
	i=$((i + 1))
	api GET /v1/stats
	n=$(jv 'r["sessions"]')
done
api POST /v1/sessions '{"image": "minimal", "tenant": "tz"}'
if [ "$n" = 8 ] && [ "$ST" = 429 ] && [[ "$(jv 'r["error"]')" == *max-sessions* ]]; then ok "the ninth session in all is a 429 (--max-sessions 8)"
else not_ok "the ninth session in all is a 429 (--max-sessions 8)" "$n sessions, $ST $R"; fi

# TCP: no key or a wrong one is a 401; a key sees its tenant's sessions only.
tcp "" GET /v1/sessions
t1=$ST
tcp "not-a-key-of-anyone-at-all" GET /v1/sessions
t2=$ST
tcp "$KA" GET /v1/sessions
t3=$ST
ids_a=$(jv '[s["id"] for s in r["sessions"]]')
if [ "$t1/$t2/$t3" = 401/401/200 ]; then ok "TCP: no key and a wrong key are 401s, a key is answered"
else not_ok "TCP: no key and a wrong key are 401s, a key is answered" "$t1 $t2 $t3"; fi
tcp "$KB" GET "/v1/sessions/$A"
x1=$ST
tcp "$KB" POST "/v1/sessions/$A/processes" '{"argv": ["true"]}'
x2=$ST
tcp "$KB" DELETE "/v1/sessions/$A"
x3=$ST
tcp "$KA" GET "/v1/sessions/$A"
x4=$ST
tcp "$KB" GET /v1/sessions
ids_b=$(jv '[s["id"] for s in r["sessions"]]')
if [ "$x1/$x2/$x3" = 404/404/404 ] && [ "$x4" = 200 ] && [[ "$ids_a" == *"$A"* ]] && [[ "$ids_b" != *"$A"* ]]; then
	ok "TCP: another tenant's key gets 404 for a session (get, start, delete) and does not list it; its own key gets it"
else not_ok "TCP: another tenant's key gets 404 for a session and does not list it" "$x1 $x2 $x3, own $x4, lists '$ids_a' / '$ids_b'"; fi
# Streamed bodies are judged by tenant before their first step: another tenant's PUT (with
# parents) and hydrate of A's session are 404 and leave nothing in it (no directory, no
# temporary); control: A's own key's PUT of the same path writes the file.
tcp "$KB" PUT "/v1/sessions/$A/files?path=/workspace/xt/deep/f&parents=1" "from-b"
z1=$ST
tcp "$KB" POST "/v1/sessions/$A/hydrate" "not-an-archive"
z2=$ST
run_in "$A" 'ls -a /workspace; ls -d /workspace/xt 2>&1'
z_before=$OUTP
tcp "$KA" PUT "/v1/sessions/$A/files?path=/workspace/xt/deep/f&parents=1" "from-a"
z3=$ST
run_in "$A" 'cat /workspace/xt/deep/f'
if [ "$z1/$z2" = 404/404 ] && [[ "$z_before" != *runbox-put* ]] && [[ "$z_before" == *"No such file"* ]] && [ "$z3" = 200 ] && [ "$OUTP" = from-a ]; then
	ok "TCP: another tenant's PUT and hydrate of a session are 404 before anything is made in it; its own key's PUT writes"
else not_ok "TCP: another tenant's streamed calls touch nothing" "b: $z1 $z2, inside: $(tr '\n' ' ' <<<"$z_before"), a: $z3 '$OUTP'"; fi
api DELETE "/v1/sessions/$L"
tcp "$KB" POST /v1/sessions '{"image": "minimal", "tenant": "ta"}'
y1=$ST
tcp "$KB" POST /v1/sessions '{"image": "minimal", "policy": "strict"}'
y2=$ST
y_tenant=$(jv 'r["tenant"]') y_id=$(jv 'r["id"]')
tcp "$KB" GET /v1/stats
y3=$ST
if [ "$y1" = 403 ] && [ "$y2" = 201 ] && [ "$y_tenant" = tb ] && [ "$y3" = 403 ]; then
	ok "TCP: a key cannot create for another tenant (403); its sessions are its tenant's; /v1/stats is the operator's"
else not_ok "TCP: a key cannot create for another tenant; its sessions are its tenant's" "$y1 $y2 tenant '$y_tenant' stats $y3"; fi

[ -n "$y_id" ] && tcp "$KB" DELETE "/v1/sessions/$y_id" # the quota's room for the next checks
# A key's entry may list the policies and images it may use: others are 403 before anything
# is made (the default policy and image count as named); control: the listed pair is made.
tcp "$KC" POST /v1/sessions '{"image": "minimal"}'
w1=$ST
tcp "$KC" POST /v1/sessions '{"image": "host", "policy": "strict"}'
w2=$ST w2r=$R
tcp "$KC" POST /v1/sessions '{"image": "minimal", "policy": "strict"}'
w3=$ST
WC=$(jv 'r["id"]')
[ -n "$WC" ] && tcp "$KC" DELETE "/v1/sessions/$WC"
if [ "$w1/$w2/$w3" = 403/403/201 ] && [[ "$w2r" == *'image `host`'* ]]; then
	ok "TCP: a key listing its policies and images cannot use others (the default policy, image host: 403); control: its listed pair is 201"
else not_ok "TCP: a key's listed policies and images hold" "$w1 $w2 ($w2r) $w3"; fi

# max_lifetime closes a session even with a process running; one without stays.
api DELETE "/v1/sessions/$C"
api POST /v1/sessions '{"image": "minimal", "tenant": "tr", "max_lifetime": 2}'
LT=$(jv 'r["id"]')
LT_RUN=$(jv 'r["run_id"]')
api POST "/v1/sessions/$LT/processes" '{"argv": ["sleep", "300"]}'
if wait_for grep -q "session $LT closed (max lifetime)" "$T/serve.log" || wait_for grep -q "session $LT closed (max lifetime)" "$T/serve.log"; then
	api GET "/v1/sessions/$A"
	if [ "$ST" = 200 ]; then ok "max_lifetime closes the session though a process runs; one without stays"
	else not_ok "max_lifetime closes the session; one without stays" "other $ST"; fi
else not_ok "max_lifetime closes the session though a process runs" "$(tail -n 3 "$T/serve.log" | tr '\n' ' ')"; fi

kill -TERM "$DPID"
wait "$DPID"
drc=$?
if [ "$drc" = 0 ] && wait_for no_marker "$MARK"; then ok "SIGTERM drains (exit 0)"; else not_ok "SIGTERM drains (exit 0)" "exit $drc"; fi
left=$(find "$STATE" -name '*.state' 2>/dev/null | wc -l)
if [ "$left" = 0 ]; then ok "no pool member or session state is left after SIGTERM"; else not_ok "no pool member or session state is left after SIGTERM" "$left state files"; fi

# The ledger: the claim, the labels, the lifetime's reason, each process's start; intact.
run_rbx ledger show "$A_RUN" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
st = [e for e in ev if e["type"] == "run_start"][0]["data"]
claim = [e for e in ev if e["type"] == "pool_claim"]
starts = [e for e in ev if e["type"] == "step_start" and "gc-" in e["data"]["text"]]
ok = st.get("pooled") is True and st["labels"] == {"team": "red"} and st["agent_version"] == "1.2" and st["tenant"] == "ta"
sys.exit(0 if ok and len(claim) == 1 and claim[0]["data"]["policy"] == "default" and len(starts) == 8 else 1)'; then
	ok "the ledger: run_start pooled with its labels and agent_version, one pool_claim, the eight step_starts"
else not_ok "the ledger: run_start pooled with its labels, one pool_claim, the eight step_starts" "$(first_line "$OUT")"; fi
run_rbx ledger show "$C_RUN" --json
c_json=$OUT
run_rbx ledger show "$LT_RUN" --json
if printf '%s' "$c_json" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin); ev = ev.get("events", ev) if isinstance(ev, dict) else ev
sys.exit(0 if not any(e["type"] == "pool_claim" for e in ev) and "pooled" not in [e for e in ev if e["type"] == "run_start"][0]["data"] else 1)' &&
	printf '%s' "$OUT" | grep -q '"max lifetime"'; then
	ok "control: a cold session has no pool_claim and no pooled; the lifetime's close is recorded with its reason"
else not_ok "control: a cold session has no pool_claim; the lifetime's close is recorded" "$(first_line "$OUT")"; fi
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the ledger's chain verifies"; else not_ok "the ledger's chain verifies" "$(first_line "$OUT$ERR")"; fi

# A daemon killed with SIGKILL leaves its pool's members and its sessions for `runbox gc`, which
# removes them and records each: a claimed one under its tenant, a waiting member under none.
# The control: before gc, their state files are there.
rbx_cmd serve --socket "$SOCK" --pool minimal:default=2
"${RBX_CMD[@]}" </dev/null >"$T/serve2.log" 2>&1 &
DPID=$!
wait_for test -S "$SOCK"
wait_for pool_ready 2 || wait_for pool_ready 2
api POST /v1/sessions '{"image": "minimal", "tenant": "tk"}'
K_RUN=$(jv 'r["run_id"]')
api GET /v1/stats
wait_for pool_ready 2 || wait_for pool_ready 2
{
	kill -KILL "$DPID"
	wait "$DPID"
} 2>/dev/null # bash's "Killed" notice
before=$(find "$STATE" -name '*.state' 2>/dev/null | wc -l)
run_rbx gc
after=$(find "$STATE" -name '*.state' 2>/dev/null | wc -l)
run_rbx ledger query --type run_end --json
ends=$(printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
print(sorted((e["tenant"] or "-", e["data"]["result"]) for e in ev if e["data"]["result"] == "abandoned" and (e["tenant"] == "" or e["run_id"] == sys.argv[1])))' "$K_RUN")
if [ "$before" -ge 3 ] && [ "$after" = 0 ] && [[ "$ends" == *"('-', 'abandoned'), ('-', 'abandoned')"*"('tk', 'abandoned')"* ]]; then
	ok "after a SIGKILL, runbox gc cleans the session and both members ($before state files), recorded as abandoned"
else not_ok "after a SIGKILL, runbox gc cleans the session and both members" "state $before -> $after, ends $ends ($(first_line "$ERR"))"; fi
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the ledger's chain verifies after gc"; else not_ok "the ledger's chain verifies after gc" "$(first_line "$OUT$ERR")"; fi

# A member that waited past --pool-max-age is destroyed and replaced, never handed out (the
# control: the first daemon's members, under the default 10 minutes, expired none).
rbx_cmd serve --socket "$SOCK" --pool minimal:default=1 --pool-max-age 1s
"${RBX_CMD[@]}" </dev/null >"$T/serve3.log" 2>&1 &
DPID=$!
wait_for test -S "$SOCK"
expired_some() {
	api GET /v1/stats
	[ "$(jv 'r["pool"][0]["expired"] >= 2 and r["pool"][0]["made"] >= 3')" = true ]
}
if wait_for expired_some || wait_for expired_some; then
	api POST /v1/sessions '{"image": "minimal", "tenant": "te"}'
	E_RUN=$(jv 'r["run_id"]')
	E_POOLED=$(jv 'r["pooled"]')
	ok "members past --pool-max-age 1s are destroyed and replaced ($(api GET /v1/stats; jv 'r["pool"][0]'))"
else not_ok "members past --pool-max-age 1s are destroyed and replaced" "$R"; fi
kill -TERM "$DPID"
wait "$DPID"
run_rbx ledger query --run "$E_RUN" --type pool_claim --json
age=$(printf '%s' "$OUT" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["data"]["age_ms"])' 2>/dev/null)
if [ "$E_POOLED" = false ] || { [ -n "$age" ] && [ "$age" -le 3000 ]; }; then ok "a claimed member is younger than the age limit (age ${age:-none, made cold} ms)"
else not_ok "a claimed member is younger than the age limit" "age '$age', pooled $E_POOLED"; fi

# Without --max-sessions-per-tenant one tenant holds at most half of --max-sessions: of 4, the
# third session of tenant td is a 429 naming the bound; control: another tenant's is made.
rbx_cmd serve --socket "$SOCK" --max-sessions 4
"${RBX_CMD[@]}" </dev/null >"$T/serve4.log" 2>&1 &
DPID=$!
wait_for test -S "$SOCK"
api POST /v1/sessions '{"image": "minimal", "tenant": "td"}'
d1=$ST
api POST /v1/sessions '{"image": "minimal", "tenant": "td"}'
d2=$ST
api POST /v1/sessions '{"image": "minimal", "tenant": "td"}'
d3=$ST d3r=$R
api POST /v1/sessions '{"image": "minimal", "tenant": "tf"}'
d4=$ST
kill -TERM "$DPID"
wait "$DPID"
if [ "$d1/$d2/$d3/$d4" = 201/201/429/201 ] && [[ "$d3r" == *"at most 2"* ]]; then
	ok "by default a tenant holds at most half of --max-sessions (the third of 4 is a 429); control: another tenant's is made"
else not_ok "by default a tenant holds at most half of --max-sessions" "$d1 $d2 $d3 ($d3r) $d4"; fi
