#!/usr/bin/env bash
# Runs are named by their owner, not a pid: `runbox kill RUN` asks the owner (`runbox run`, or
# `runbox serve` for a session's run) over the run's control socket to cancel it, the owner
# records the end with its reason and goes on (a daemon keeps its other sessions); a peer of
# another uid is refused; gc cleans up after a dead owner and leaves a live one alone; the
# gateway ends with its runner's process.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init runkill

# start_bg MARKER [RUN-OPTIONS]: runbox running a step that says `got-term` on SIGTERM and
# otherwise runs until the test ends; BG is runbox's pid, ID the run's id (from its state file,
# which holds the step's command).
start_bg() {
	local m=$1
	shift
	rbx_cmd run --image minimal --timeout 120s "$@" -- /bin/sh -c \
		"trap 'echo got-term; exit 3' TERM; /bin/probe sleep-forever $m & while :; do sleep 0.1; done"
	"${RBX_CMD[@]}" >"$T/bg.out" 2>"$T/bg.err" </dev/null &
	BG=$!
	ID=""
	wait_for state_has "$m" || return 1
	ID=$(basename "$(grep -sl -- "$m" "$STATE"/run/*.state | head -1)" .state)
	# The step runs (its probe is seen) and the owner took its socket.
	wait_for test -S "$STATE/run/$ID.ctl" && wait_for step_up "$m"
}
state_has() { grep -qs -- "$1" "$STATE"/run/*.state; } # the glob expanded at each try
# The step's probe (not runbox, whose own command line holds the marker too).
step_up() { has_marker --prefix "/bin/probe sleep-forever $1"; }
step_gone() { no_marker --prefix "/bin/probe sleep-forever $1"; }
# run_end_of RUN: the run's run_end event's data as JSON, or nothing.
run_end_of() {
	run_rbx ledger query --run "$1" --type run_end --json
	"$PY" -c 'import json,sys; e=json.loads(sys.argv[1]); print(json.dumps(e[-1]["data"]) if e else "")' "$OUT" 2>/dev/null
}
# ask_socket PATH RUN [AS_NOBODY]: a kill request sent straight to a control socket; prints
# the owner's answer (or the connect error).
ask_socket() {
	local who=()
	[ -n "${3:-}" ] && who=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all)
	"${who[@]}" "$PY" - "$1" "$2" <<'EOF' 2>&1
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect: %s" % e.strerror); sys.exit(0)
# A refused peer's answer may come, and the socket close, before its request is written
# (the owner checks SO_PEERCRED first): the answer is still queued for us to read.
try:
    s.sendall(json.dumps({"op": "kill", "run_id": sys.argv[2], "signal": 15}).encode() + b"\n")
    s.shutdown(socket.SHUT_WR)
except (BrokenPipeError, ConnectionResetError):
    pass
s.settimeout(10)
print(s.recv(4096).decode().strip())
EOF
}

# --- runbox kill of a running `runbox run` ---
# Control: a run id nobody owns is refused (nothing is killed by a guess).
run_rbx kill 0deadbeef0000000000
if [ "$RC" = 125 ] && grep -q "no live run" <<<"$ERR"; then ok "control: runbox kill of an unknown run fails, naming it"
else not_ok "control: runbox kill of an unknown run fails, naming it" "exit $RC: $(first_line "$ERR")"; fi

m=$(new_marker)
if ! start_bg "$m"; then not_ok "runbox kill RUN ends a runbox run as cancelled" "the step never started: $(first_line "$(cat "$T/bg.err")")"
else
	mode=$(stat -c '%a %u' "$STATE/run/$ID.ctl")
	want_uid=$([ "$MODE" = root ] && echo 0 || echo $NOBODY)
	if [ "$mode" = "600 $want_uid" ]; then ok "the control socket is 0600 and its owner's"
	else not_ok "the control socket is 0600 and its owner's" "mode and uid: $mode"; fi
	if grep -q '"control"' "$STATE/run/$ID.state" && grep -q "\"runner_pid\": *$BG\b\|\"runner_pid\":$BG\b" "$STATE/run/$ID.state"; then
		ok "the state file names the owner (pid $BG) and its control socket"
	else not_ok "the state file names the owner (pid $BG) and its control socket" "$(head -c 300 "$STATE/run/$ID.state")"; fi
	run_rbx kill "$ID"
	krc=$RC kerr=$ERR
	wait "$BG"
	rc=$?
	end=$(run_end_of "$ID")
	if [ "$krc" != 0 ]; then not_ok "runbox kill RUN ends a runbox run as cancelled" "kill exit $krc: $(first_line "$kerr")"
	elif ! wait_for step_gone "$m"; then not_ok "runbox kill RUN ends a runbox run as cancelled" "the step still runs"
	elif [ "$rc" = 125 ]; then not_ok "runbox kill RUN ends a runbox run as cancelled" "runbox exit 125: $(first_line "$(cat "$T/bg.err")")"
	elif ! "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(not (d["result"] == "cancelled" and d["reason"] == "killed by runbox kill"))' "$end" 2>/dev/null; then
		not_ok "runbox kill RUN ends a runbox run as cancelled" "run_end: ${end:-none}"
	else ok "runbox kill RUN ends a runbox run as cancelled; the runner recorded why (exit $rc)"; fi
	# The step got the cancel's SIGTERM through init, as on the runner's own SIGTERM.
	if grep -q got-term "$T/bg.out"; then ok "the step got SIGTERM first (its trap ran)"
	else not_ok "the step got SIGTERM first (its trap ran)" "stdout: $(first_line "$(cat "$T/bg.out")")"; fi
	if [ ! -e "$STATE/run/$ID.state" ] && [ ! -e "$STATE/run/$ID.ctl" ] && [ ! -e "$STATE/run/$ID" ]; then
		ok "the runner removed its state file, socket and run directory"
	else not_ok "the runner removed its state file, socket and run directory" "$(ls "$STATE/run")"; fi
	run_rbx kill "$ID"
	if [ "$RC" = 125 ]; then ok "a second kill of the ended run fails"; else not_ok "a second kill of the ended run fails" "exit $RC"; fi
fi

# --signal KILL: the sandbox goes at once; the step's trap never runs.
m=$(new_marker)
if ! start_bg "$m"; then not_ok "runbox kill --signal KILL" "the step never started"
else
	run_rbx kill --signal KILL "$ID"
	wait "$BG"
	end=$(run_end_of "$ID")
	if [ "$RC" = 0 ] && wait_for step_gone "$m" && ! grep -q got-term "$T/bg.out" && grep -q 'killed by runbox kill' <<<"$end"; then
		ok "runbox kill --signal KILL ends the run at once (no trap ran), recorded"
	else not_ok "runbox kill --signal KILL ends the run at once (no trap ran), recorded" "kill exit $RC, out $(first_line "$(cat "$T/bg.out")"), run_end ${end:-none}"; fi
fi
run_rbx kill --signal NOPE 0deadbeef0000000000
if [ "$RC" = 125 ] && grep -q -- "--signal" <<<"$ERR"; then ok "a bad --signal is refused, naming it"
else not_ok "a bad --signal is refused, naming it" "exit $RC: $(first_line "$ERR")"; fi

# --- a peer of another uid is refused (SO_PEERCRED), against a root-owned run ---
if [ "$MODE" = root ]; then
	m=$(new_marker)
	if ! start_bg "$m"; then not_ok "a control request from another uid is refused" "the step never started"
	else
		sock=$STATE/run/$ID.ctl
		# runbox kill as uid 65534: refused (the run's files are root's); the run goes on.
		nob=$(as_nobody env -i PATH=$SAFE_PATH HOME=/nonexistent RUNBOX_STATE_DIR="$STATE" "$RUNBOX" kill "$ID" 2>&1)
		nrc=$?
		# Past the socket's mode (opened to all here): the peer check itself refuses uid 65534.
		chmod 0666 "$sock"
		ans=$(ask_socket "$sock" "$ID" nobody)
		sleep 0.3
		if [ "$nrc" = 0 ]; then not_ok "runbox kill by uid $NOBODY of a root run is refused" "it exited 0"
		elif ! step_up "$m"; then not_ok "runbox kill by uid $NOBODY of a root run is refused" "the run ended: $(first_line "$nob")"
		else ok "runbox kill by uid $NOBODY of a root run is refused ($(first_line "$nob"))"; fi
		if grep -q '"error": *"refused: uid 65534' <<<"$ans" && step_up "$m"; then
			ok "a control request from uid $NOBODY is refused by the peer check; the run goes on"
		else not_ok "a control request from uid $NOBODY is refused by the peer check; the run goes on" "answer: $ans"; fi
		# Control: the same request on the same socket from root (the owner) is taken.
		ans=$(ask_socket "$sock" "$ID")
		wait "$BG"
		if grep -q '"ok": *true' <<<"$ans" && wait_for step_gone "$m"; then
			ok "control: the same request from the owner's uid is taken and the run ends"
		else not_ok "control: the same request from the owner's uid is taken and the run ends" "answer: $ans"; fi
	fi
fi

# --- a dead owner is gc's; a live one is not touched ---
m_live=$(new_marker)
m_dead=$(new_marker)
if ! start_bg "$m_live"; then not_ok "gc handles a dead owner" "the live run never started"
else
	LIVE=$BG LIVE_ID=$ID
	if ! start_bg "$m_dead"; then not_ok "gc handles a dead owner" "the second run never started"
	else
		DEAD_ID=$ID
		kill -KILL "$BG"
		wait "$BG" 2>/dev/null
		run_rbx kill "$DEAD_ID"
		if [ "$RC" = 125 ] && grep -q "runbox gc" <<<"$ERR"; then ok "runbox kill of a run whose owner died points to gc"
		else not_ok "runbox kill of a run whose owner died points to gc" "exit $RC: $(first_line "$ERR")"; fi
		run_rbx gc
		end=$(run_end_of "$DEAD_ID")
		if [ ! -e "$STATE/run/$DEAD_ID.state" ] && [ ! -e "$STATE/run/$DEAD_ID.ctl" ] && [ ! -e "$STATE/run/$DEAD_ID" ] &&
			wait_for step_gone "$m_dead" && grep -q '"abandoned"' <<<"$end"; then
			ok "gc cleans up after a dead owner (state, socket, run dir, processes) and records it"
		else not_ok "gc cleans up after a dead owner (state, socket, run dir, processes) and records it" "left: $(ls "$STATE/run" | tr '\n' ' '); run_end ${end:-none}"; fi
		# Control: the live owner's run is untouched by that gc.
		if step_up "$m_live" && [ -e "$STATE/run/$LIVE_ID.state" ] && [ -S "$STATE/run/$LIVE_ID.ctl" ] && kill -0 "$LIVE"; then
			ok "control: gc leaves a live owner's run alone"
		else not_ok "control: gc leaves a live owner's run alone" "marker $(step_up "$m_live" && echo up || echo gone), $(ls "$STATE/run" | tr '\n' ' ')"; fi
	fi
	run_rbx kill "$LIVE_ID"
	wait "$LIVE"
	wait_for step_gone "$m_live"
fi

# --- the gateway ends with its runner's process (a pidfd of it, not the forking thread) ---
# The step's first connection starts the gateway (a child of runbox); kill -9 of runbox ends it.
# Control: while runbox lives, so does its gateway.
m=$(new_marker)
rbx_cmd run --net gateway --image host --timeout 120s -- python3 -c "
import os, socket, time, urllib.parse
u = urllib.parse.urlparse(os.environ['RUNBOX_API_URL'])
s = socket.create_connection((u.hostname, u.port))
time.sleep(120) # $m"
"${RBX_CMD[@]}" >/dev/null 2>"$T/gw.err" </dev/null &
GBG=$!
GW=""
wait_for eval 'GW=$(pgrep -P "$GBG" -x runbox-gateway | head -n 1); [ -n "$GW" ]'
if [ -z "$GW" ]; then not_ok "the gateway ends when its runner is killed" "no runbox-gateway child of runbox: $(first_line "$(cat "$T/gw.err")")"
	kill "$GBG" 2>/dev/null
else
	sleep 0.5
	if kill -0 "$GW" 2>/dev/null; then ctl=ok; else ctl="the gateway ended while runbox lived"; fi
	kill -KILL "$GBG"
	wait "$GBG" 2>/dev/null
	if [ "$ctl" != ok ]; then not_ok "the gateway ends when its runner is killed" "control: $ctl"
	elif wait_for sh -c "! kill -0 $GW 2>/dev/null"; then ok "the gateway ends when its runner is killed (control: it ran while runbox did)"
	else not_ok "the gateway ends when its runner is killed" "pid $GW still runs"; kill -9 "$GW" 2>/dev/null; fi
fi
for p in $(pids_with "$m"); do kill -9 "$p" 2>/dev/null; done
run_rbx gc

# --- a serve session's run: that session closes, the daemon and its other sessions go on ---
SOCK=$T/xdg/serve.sock
CLIENT=()
[ "$MODE" = root ] || CLIENT=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all)
api() {
	local out
	out=$("${CLIENT[@]}" curl -s -w '\n%{http_code}' --max-time 60 --unix-socket "$SOCK" \
		-X "$1" ${3+--data-binary "$3"} "http://runbox$2")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
jv() { "$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(v if isinstance(v,str) else json.dumps(v))' "$R" "$1" 2>/dev/null; }
rbx_cmd serve --socket "$SOCK"
"${RBX_CMD[@]}" </dev/null >"$T/serve.log" 2>&1 &
DPID=$!
if ! wait_for test -S "$SOCK"; then not_ok "runbox serve listens" "$(first_line "$(cat "$T/serve.log")")"
else
	api POST /v1/sessions '{"image": "minimal"}'
	SA=$(jv 'r["id"]') RA=$(jv 'r["run_id"]')
	api POST /v1/sessions '{"image": "minimal"}'
	SB=$(jv 'r["id"]')
	run_rbx exec --socket "$SOCK" "$SA" -- echo a-answers
	a_before=$OUT
	if [ -z "$RA" ] || [ "$a_before" != a-answers ]; then not_ok "runbox kill RUN of a serve session" "session A: run '$RA', exec '$a_before'"
	else
		run_rbx kill "$RA"
		krc=$RC kerr=$ERR
		wait_for sh -c "! test -e '$STATE/run/$RA.state'"
		api GET "/v1/sessions/$SA"
		a_after=$ST
		run_rbx exec --socket "$SOCK" "$SB" -- echo b-answers
		end=$(run_end_of "$RA")
		if [ "$krc" != 0 ]; then not_ok "runbox kill RUN closes that serve session only" "kill exit $krc: $(first_line "$kerr")"
		elif [ "$a_after" != 404 ]; then not_ok "runbox kill RUN closes that serve session only" "session A still answers $a_after"
		elif ! kill -0 "$DPID" 2>/dev/null; then not_ok "runbox kill RUN closes that serve session only" "the daemon stopped"
		elif [ "$OUT" != b-answers ]; then not_ok "runbox kill RUN closes that serve session only" "session B: exit $RC, '$OUT' ($(first_line "$ERR"))"
		elif ! grep -q 'killed by runbox kill' <<<"$end"; then not_ok "runbox kill RUN closes that serve session only" "run_end: ${end:-none}"
		else ok "runbox kill RUN closes that serve session only (recorded); the daemon and session B go on"; fi
	fi
	api DELETE "/v1/sessions/$SB"
	kill -TERM "$DPID"
	wait "$DPID"
fi
