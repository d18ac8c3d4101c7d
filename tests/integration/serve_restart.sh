#!/usr/bin/env bash
# runbox serve after a daemon restart (docs/serve.md "Restarts"): daemon A is killed with
# SIGKILL while its session holds a process and took a snapshot; daemon C started on the same
# state directory cleans up A's session (its processes gone, its state file removed) and its
# waiting warm member, and records both lost; asking C for A's session id is a 404 that says
# so and names the snapshot, which restores into a new session. The control: daemon B, alive on
# the same state directory, keeps its session untouched (process, state file, no run_end); an
# id that never was is a plain 404.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_restart

SOCK=$T/xdg/runbox/a.sock
SOCKB=$T/xdg/runbox/b.sock
CLIENT=()
[ "$MODE" = root ] || CLIENT=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all)

# api [-b] METHOD PATH [BODY]: one call (on daemon B's socket with -b); sets ST and R.
api() {
	local out sock=$SOCK
	if [ "$1" = -b ]; then sock=$SOCKB; shift; fi
	out=$("${CLIENT[@]}" curl -s -w '\n%{http_code}' --max-time 60 --unix-socket "$sock" \
		-X "$1" ${3+--data-binary "$3"} "http://runbox$2")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
# start_daemon SOCKET LOG [ARGS...]: sets DPID; returns once the daemon answers (a dead daemon's socket
# file is left behind, so its presence says nothing).
answers() { "${CLIENT[@]}" curl -sf -o /dev/null --max-time 5 --unix-socket "$1" http://runbox/v1/sessions; }
start_daemon() {
	rbx_cmd serve --socket "$1" "${@:3}"
	"${RBX_CMD[@]}" </dev/null >"$2" 2>&1 &
	DPID=$!
	wait_for answers "$1"
}
# procs MARK: how many host processes carry MARK in their command line.
procs() { pgrep -f -- "$1" | wc -l; }
# ended RUN_ID: "result what" of the run's run_end and cleanup, or nothing.
ended() {
	run_rbx ledger show "$1" --json
	printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev["events"] if isinstance(ev, dict) else ev
end = [e["data"].get("result") for e in ev if e["type"] == "run_end"]
what = [e["data"].get("what") for e in ev if e["type"] == "cleanup"]
print(" ".join(end + what))' 2>/dev/null
}

pool_ready() {
	api GET /v1/stats
	[ "$(jv 'r["pool"][0]["ready"]')" = 1 ]
}
if ! start_daemon "$SOCK" "$T/a.log" --pool minimal:default=1; then not_ok "daemon A listens" "$(first_line "$(cat "$T/a.log")")"; exit 0; fi
APID=$DPID
if ! start_daemon "$SOCKB" "$T/b.log"; then not_ok "daemon B listens" "$(first_line "$(cat "$T/b.log")")"; kill "$APID"; exit 0; fi
BPID=$DPID

MARK=$(new_marker)
api POST /v1/sessions '{"image": "minimal"}'
SA=$(jv 'r["id"]'); RUNA=$(jv 'r["run_id"]')
api POST "/v1/sessions/$SA/processes" "{\"argv\": [\"sh\", \"-c\", \"echo kept-$MARK > /workspace/kept\"]}"
PA=$(jv 'r["id"]')
api GET "/v1/sessions/$SA/processes/$PA/output?wait_ms=10000"
api POST "/v1/sessions/$SA/snapshots" '{}'
REF=$(jv 'r["ref"]')
api POST "/v1/sessions/$SA/processes" "{\"argv\": [\"sh\", \"-c\", \"sleep 300; : a-$MARK\"]}"
api -b POST /v1/sessions '{"image": "minimal"}'
SB=$(jv 'r["id"]'); RUNB=$(jv 'r["run_id"]')
api -b POST "/v1/sessions/$SB/processes" "{\"argv\": [\"sh\", \"-c\", \"sleep 300; : b-$MARK\"]}"
wait_for pool_ready
if [[ "$REF" == sha256:* ]] && [ -n "$RUNA" ] && [ -n "$RUNB" ] && wait_for test "$(procs "a-$MARK")" -ge 1 &&
	wait_for test "$(procs "b-$MARK")" -ge 1; then
	ok "daemon A's session took a snapshot and runs a process; daemon B's runs one too"
else not_ok "the sessions are set up" "ref '$REF' runs '$RUNA' '$RUNB' ($(first_line "$R"))"; kill "$APID" "$BPID"; exit 0; fi

{
	kill -KILL "$APID"
	wait "$APID"
} 2>/dev/null
# The control before the restart: A's run is still there for someone to clean up, and so is
# its warm member's (no tenant: a state file naming none).
state_a=$(find "$STATE" -name "$RUNA.state" | wc -l)
members() { grep -l '"tenant":""' $(find "$STATE" -name '*.state') 2>/dev/null | wc -l; }
members_before=$(members)
end_before=$(ended "$RUNA")
if [ "$state_a" = 1 ] && [ -z "$end_before" ] && [ "$members_before" = 1 ]; then
	ok "after A's SIGKILL, its session's and warm member's state files are left and the ledger has no end yet"
else not_ok "after A's SIGKILL, its runs' state files are left" "state files $state_a, members $members_before, end '$end_before'"; fi

if ! start_daemon "$SOCK" "$T/c.log"; then not_ok "daemon C listens" "$(first_line "$(cat "$T/c.log")")"; kill "$BPID"; exit 0; fi
CPID=$DPID
end_a=$(ended "$RUNA")
state_a=$(find "$STATE" -name "$RUNA.state" | wc -l)
if [ "$end_a" = "lost daemon lost" ] && [ "$state_a" = 0 ] && [ "$(procs "a-$MARK")" = 0 ]; then
	ok "daemon C records A's session lost (run_end lost, cleanup daemon lost), its state file and processes gone"
else not_ok "daemon C records A's session lost" "ledger '$end_a', state files $state_a, processes $(procs "a-$MARK")"; fi

run_rbx ledger query --type run_end --json
member_ends=$(printf '%s' "$OUT" | "$PY" -c '
import json, sys
print(sum(1 for e in json.load(sys.stdin) if e["tenant"] == "" and e["data"]["result"] == "lost"))' 2>/dev/null)
if [ "$(members)" = 0 ] && [ "$member_ends" = 1 ]; then ok "A's waiting warm member is cleaned up and recorded lost too (under no tenant)"
else not_ok "A's warm member cleaned up and recorded lost" "member state files $(members), lost ends under no tenant '$member_ends'"; fi

# The control: B's session, its daemon alive, is not touched.
end_b=$(ended "$RUNB")
state_b=$(find "$STATE" -name "$RUNB.state" | wc -l)
api -b POST "/v1/sessions/$SB/processes" '{"argv": ["echo", "still"]}'
st_b=$ST
if [ -z "$end_b" ] && [ "$state_b" = 1 ] && [ "$(procs "b-$MARK")" -ge 1 ] && [ "$st_b" = 201 ]; then
	ok "control: live daemon B's session is untouched (no end, state file, process, still answers)"
else not_ok "control: live daemon B's session is untouched" "ledger '$end_b', state files $state_b, processes $(procs "b-$MARK"), start $st_b"; fi

api GET "/v1/sessions/$SA"
if [ "$ST" = 404 ] && [ "$(jv 'r["lost"]')" = true ] && [ "$(jv 'r["snapshot"]')" = "$REF" ] &&
	[ "$(jv 'r["run_id"]')" = "$RUNA" ] && [[ "$(jv 'r["error"]')" == *lost*"$REF"* ]]; then
	ok "C answers A's session id with a 404 saying it was lost and naming its last snapshot"
else not_ok "C answers A's session id: lost, with its snapshot" "$ST $(first_line "$R")"; fi
api POST "/v1/sessions/$SA/processes" '{"argv": ["true"]}'
lost_proc=$ST/$(jv 'r["lost"]')
api GET /v1/sessions/0123456789abcdef0123456789abcdef
if [ "$lost_proc" = 404/true ] && [ "$ST" = 404 ] && [ "$(jv 'r.get("lost")')" = null ] &&
	[[ "$(jv 'r["error"]')" == "no session"* ]]; then
	ok "every route of the lost session says so; control: an id that never was is a plain 404"
else not_ok "a lost session on another route; an unknown id" "process start $lost_proc, unknown $ST $(first_line "$R")"; fi

api POST /v1/sessions "{\"image\": \"minimal\", \"snapshot\": \"$REF\"}"
SC=$(jv 'r["id"]')
api POST "/v1/sessions/$SC/processes" '{"argv": ["cat", "/workspace/kept"]}'
PC=$(jv 'r["id"]')
api GET "/v1/sessions/$SC/processes/$PC/output?wait_ms=10000"
if [ "$(jv '"".join(c["data"] for c in r["chunks"])')" = "kept-$MARK" ]; then
	ok "a new session from the lost session's snapshot has its files"
else not_ok "a new session from the lost session's snapshot has its files" "$(first_line "$R")"; fi

kill -TERM "$CPID" "$BPID" 2>/dev/null
wait "$CPID" "$BPID" 2>/dev/null
end_b=$(ended "$RUNB")
if [ "$end_b" = "cancelled daemon stopped" ]; then ok "B's session is recorded as its own daemon closed it (daemon stopped)"
else not_ok "B's session recorded at its daemon's stop" "'$end_b'"; fi
