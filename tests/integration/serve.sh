#!/usr/bin/env bash
# runbox serve (docs/serve.md), each property against a control: a session made over the unix
# socket; exec with its exit code passed through; two processes at once (one on stdin, one
# printing); a background process holds no call open; a file kept between execs of one session
# and absent from another; a path outside /workspace is the sandbox's own; strict bodies (400
# naming the key), 404 for an unknown session; the
# socket 0600; the ledger holds each process's exact text; SIGTERM closes every session and
# leaves no sandbox process and no cgroup.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve

serve_client


# The daemon, as the mode's user: rootless with the default socket under XDG_RUNTIME_DIR.
if [ "$MODE" = user ]; then rbx_cmd serve; else rbx_cmd serve --socket "$SOCK"; fi
"${RBX_CMD[@]}" </dev/null >"$T/serve.log" 2>&1 &
DPID=$!
if ! wait_for test -S "$SOCK"; then
	not_ok "runbox serve listens on $SOCK" "$(first_line "$(cat "$T/serve.log")")"
	kill "$DPID" 2>/dev/null
	exit 0
fi
ok "runbox serve listens on $SOCK"

# The socket is 0600, and so only its owner reaches it.
mode=$(stat -c %a "$SOCK")
if [ "$mode" = 600 ]; then ok "the socket is mode 0600"; else not_ok "the socket is mode 0600" "mode $mode"; fi
if [ "$MODE" = root ]; then
	api GET /v1/sessions
	other=$(as_nobody curl -s -o /dev/null -w '%{http_code}' --unix-socket "$SOCK" http://runbox/v1/sessions)
	if [ "$ST" = 200 ] && [ "$other" = 000 ]; then ok "the socket's owner is answered, another user cannot connect"
	else not_ok "the socket's owner is answered, another user cannot connect" "owner $ST, uid $NOBODY $other"; fi
fi

# A session, by the CLI.
rbx_cmd session create --socket "$SOCK" --image minimal
S=$("${RBX_CMD[@]}" 2>"$T/err")
if [[ "$S" =~ ^[0-9a-f]{32}$ ]]; then ok "session create prints an id"
else not_ok "session create prints an id" "got '$S' ($(first_line "$(cat "$T/err")"))"; exit 0; fi
S2=$("${RBX_CMD[@]}" 2>/dev/null)

run_rbx exec --socket "$SOCK" "$S" -- echo hi
if [ "$RC" = 0 ] && [ "$OUT" = hi ]; then ok "exec echo hi: exit 0, output hi"
else not_ok "exec echo hi: exit 0, output hi" "exit $RC, out '$OUT' ($(first_line "$ERR"))"; fi
run_rbx exec --socket "$SOCK" "$S" -- sh -c 'exit 3'
if [ "$RC" = 3 ]; then ok "exec sh -c 'exit 3': exit 3 passed through"; else not_ok "exec: exit 3 passed through" "exit $RC"; fi
run_rbx exec --socket "$SOCK" "$S" -- sh -c 'echo to-err >&2'
if [ "$RC" = 0 ] && [ "$(cat "$T/err")" = to-err ] && [ -z "$OUT" ]; then ok "exec: stderr streams to stderr"
else not_ok "exec: stderr streams to stderr" "out '$OUT' err '$(cat "$T/err")'"; fi

# A file written by one exec is read by the next in the same session; another session's
# sandbox does not have it.
MARK=$(new_marker)
run_rbx exec --socket "$SOCK" "$S" -- sh -c "echo $MARK > /workspace/kept"
run_rbx exec --socket "$SOCK" "$S" -- cat /workspace/kept
if [ "$RC" = 0 ] && [ "$OUT" = "$MARK" ]; then ok "a file written by one exec is read by the next (same session)"
else not_ok "a file written by one exec is read by the next (same session)" "exit $RC, out '$OUT'"; fi
run_rbx exec --socket "$SOCK" "$S2" -- cat /workspace/kept
if [ "$RC" != 0 ] && [ "$OUT" != "$MARK" ]; then ok "another session does not see it (exit $RC)"
else not_ok "another session does not see it" "exit $RC, out '$OUT'"; fi

# Two processes at once: a reader of stdin waits while a printer finishes; then its stdin is
# written and echoed.
api POST "/v1/sessions/$S/processes" '{"argv": ["cat"], "stdin": true}'
P1=$(jv 'r["id"]')
api POST "/v1/sessions/$S/processes" '{"argv": ["echo", "printer"]}'
P2=$(jv 'r["id"]')
api GET "/v1/sessions/$S/processes/$P2/output?wait_ms=10000"
p2=$(jv '[r["exited"], "".join(c["data"] for c in r["chunks"]), r.get("result", {}).get("exit")]')
api GET "/v1/sessions/$S/processes/$P1"
p1=$(jv 'r["state"]')
if [ "$p2" = '[true, "printer\n", 0]' ] && [ "$p1" = running ]; then ok "two at once: the printer finished while the stdin reader runs"
else not_ok "two at once: the printer finished while the stdin reader runs" "printer $p2, reader $p1"; fi
api GET "/v1/sessions/$S/processes/$P1/output?wait_ms=300"
quiet=$(jv '[r["exited"], len(r["chunks"])]')
api POST "/v1/sessions/$S/processes/$P1/stdin?close=1" "fed-$MARK"
api GET "/v1/sessions/$S/processes/$P1/output?wait_ms=10000"
fed=$(jv '[r["exited"], "".join(c["data"] for c in r["chunks"])]')
if [ "$quiet" = '[false, 0]' ] && [ "$fed" = "[true, \"fed-$MARK\"]" ]; then ok "its stdin, written and closed, is echoed (and nothing before)"
else not_ok "its stdin, written and closed, is echoed (and nothing before)" "before $quiet, after $fed"; fi
# Output past after_seq only: the same call from the last seq has no chunk.
api GET "/v1/sessions/$S/processes/$P1/output?after_seq=1&wait_ms=0"
if [ "$(jv 'len(r["chunks"])')" = 0 ]; then ok "after_seq skips what was read"; else not_ok "after_seq skips what was read" "$R"; fi

# A background process holds no call open: it is still running when a later exec has ended.
api POST "/v1/sessions/$S/processes" "{\"argv\": [\"sh\", \"-c\", \"sleep 300; : $MARK\"]}"
BG=$(jv 'r["id"]')
bgst=$ST
run_rbx exec --socket "$SOCK" "$S" -- echo after
api GET "/v1/sessions/$S/processes/$BG"
if [ "$bgst" = 201 ] && [ "$OUT" = after ] && [ "$(jv 'r["state"]')" = running ]; then
	ok "a background process does not block a second call"
else not_ok "a background process does not block a second call" "start $bgst, exec out '$OUT', bg $(jv 'r["state"]')"; fi
if has_marker "$MARK"; then ok "control: the session's background process is on the host"; else not_ok "control: the session's background process is on the host"; fi

# A signal reaches one process; the control, another background process, goes on.
api POST "/v1/sessions/$S/processes" '{"argv": ["sleep", "300"]}'
SL=$(jv 'r["id"]')
api POST "/v1/sessions/$S/processes/$SL/signal" '{"signal": "TERM"}'
sigst=$ST
api GET "/v1/sessions/$S/processes/$SL/output?wait_ms=10000"
sig=$(jv '[r["exited"], r["result"]["status"], r["result"]["exit"]]')
api GET "/v1/sessions/$S/processes/$BG"
if [ "$sigst" = 200 ] && [ "$sig" = '[true, "signaled", 143]' ] && [ "$(jv 'r["state"]')" = running ]; then
	ok "signal TERM ends that process (143), the other goes on"
else not_ok "signal TERM ends that process (143), the other goes on" "signal $sigst, $sig, other $(jv 'r["state"]')"; fi
api POST "/v1/sessions/$S/processes/$BG/signal" '{"signal": "NOPE"}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.signal'* ]]; then ok "an unknown signal is a 400 naming \$.signal"
else not_ok "an unknown signal is a 400 naming \$.signal" "$ST $R"; fi

# A script, run by the policy's shell; its output not UTF-8 comes base64.
api POST "/v1/sessions/$S/processes" '{"script": "printf \"\\377\\376\"; exit 7"}'
SC=$(jv 'r["id"]')
api GET "/v1/sessions/$S/processes/$SC/output?wait_ms=10000"
scr=$(jv '[r["result"]["exit"], [(c.get("encoding"), c["data"]) for c in r["chunks"]]]')
if [ "$scr" = '[7, [["base64", "//4="]]]' ]; then ok "a script runs; bytes that are not UTF-8 come base64"
else not_ok "a script runs; bytes that are not UTF-8 come base64" "$scr"; fi

# An idle timeout closes a session nobody calls; the control session (none set) stays.
api POST /v1/sessions '{"image": "minimal", "idle_timeout": 1}'
IDLE=$(jv 'r["id"]')
api POST "/v1/sessions/$IDLE/processes" '{"argv": ["true"]}'
sleep 3
api GET "/v1/sessions/$IDLE"
idle_st=$ST
api GET "/v1/sessions/$S"
if [ "$idle_st" = 404 ] && [ "$ST" = 200 ] && wait_for grep -q "session $IDLE closed (idle timeout)" "$T/serve.log"; then
	ok "an idle session is closed after its idle_timeout; one without stays"
else not_ok "an idle session is closed after its idle_timeout; one without stays" "idle $idle_st, other $ST"; fi

# Files: PUT then an exec reads it; an exec writes, GET reads it back.
api PUT "/v1/sessions/$S/files?path=/workspace/put.txt" "put-$MARK"
putst=$ST
run_rbx exec --socket "$SOCK" "$S" -- cat /workspace/put.txt
if [ "$putst" = 200 ] && [ "$OUT" = "put-$MARK" ]; then ok "a file PUT is read by an exec"; else not_ok "a file PUT is read by an exec" "put $putst, out '$OUT'"; fi
run_rbx exec --socket "$SOCK" "$S" -- sh -c "printf 'got-$MARK' > /workspace/w.txt"
api GET "/v1/sessions/$S/files?path=/workspace/w.txt"
if [ "$ST" = 200 ] && [ "$R" = "got-$MARK" ]; then ok "a file an exec wrote is read by GET"; else not_ok "a file an exec wrote is read by GET" "$ST '$R'"; fi
api GET "/v1/sessions/$S2/files?path=/workspace/w.txt"
if [ "$ST" = 404 ]; then ok "control: another session's GET of it is a 404"; else not_ok "control: another session's GET of it is a 404" "$ST"; fi
# Links planted inside the sandbox to host paths: resolved inside the sandbox's /workspace, so
# neither the host file is read nor a host directory written. The controls: the same host file
# and directory are readable and writable by the daemon's user (so only resolution stops it).
echo "host-$MARK" >"$T/hostsecret"
chmod 0644 "$T/hostsecret"
mkdir -p "$T/hostdir"
chmod 0777 "$T/hostdir"
run_rbx exec --socket "$SOCK" "$S" -- sh -c "ln -s $T/hostsecret /workspace/lf; ln -s $T/hostdir /workspace/ld; ln -s / /workspace/lroot"
api GET "/v1/sessions/$S/files?path=/workspace/lf"
a=$ST/$R
api GET "/v1/sessions/$S/files?path=/workspace/lroot$T/hostsecret"
b=$ST/$R
api PUT "/v1/sessions/$S/files?path=/workspace/ld/planted" "x"
c=$ST
if [[ "$a" != *"host-$MARK"* ]] && [[ "$b" != *"host-$MARK"* ]] && [ ! -e "$T/hostdir/planted" ] && [ "$c" != 200 ]; then
	ok "links planted inside never reach a host path (read: ${a%%/*}, ${b%%/*}; write: $c)"
else not_ok "links planted inside never reach a host path" "read $a | $b, write $c, planted $(ls "$T/hostdir")"; fi
if "${CLIENT[@]}" cat "$T/hostsecret" | grep -q "host-$MARK" && "${CLIENT[@]}" touch "$T/hostdir/ctl"; then
	ok "control: the daemon's user can read and write those host paths itself"
else not_ok "control: the daemon's user can read and write those host paths itself"; fi
# A path outside /workspace is the sandbox's own file: its /etc/passwd as a process inside reads
# it; the control: the host's differs, so this is not the host's.
api GET "/v1/sessions/$S/files?path=/etc/passwd"
run_rbx exec --socket "$SOCK" "$S" -- cat /etc/passwd
if [ "$ST" = 200 ] && [ "${R%$'\n'}" = "$OUT" ] && [ "${R%$'\n'}" != "$(cat /etc/passwd)" ]; then
	ok "a path outside /workspace is the sandbox's own file (its /etc/passwd, not the host's)"
else not_ok "a path outside /workspace is the sandbox's own file" "$ST $(first_line "$R")"; fi

# A session's env is every process's; a process's env adds to it; another session has neither.
api POST /v1/sessions "{\"image\": \"minimal\", \"env\": {\"RB_SESS\": \"s-$MARK\"}}"
SE=$(jv 'r["id"]')
api POST "/v1/sessions/$SE/processes" "{\"argv\": [\"sh\", \"-c\", \"echo \$RB_SESS \$RB_PROC\"], \"env\": {\"RB_PROC\": \"p\"}}"
EP=$(jv 'r["id"]')
api GET "/v1/sessions/$SE/processes/$EP/output?wait_ms=10000"
e1=$(jv '"".join(c["data"] for c in r["chunks"])')
run_rbx exec --socket "$SOCK" "$S" -- sh -c 'echo "[$RB_SESS]"'
if [ "$e1" = "s-$MARK p" ] && [ "$OUT" = "[]" ]; then ok "session env and process env reach the process; another session has none"
else not_ok "session env and process env reach the process; another session has none" "got '$e1', other '$OUT'"; fi
api DELETE "/v1/sessions/$SE"

# Strict bodies: an unknown key and a wrong type are 400s naming the key by path; a good
# body is taken.
api POST /v1/sessions '{"image": "minimal", "imagex": 1}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.imagex'* ]]; then ok "an unknown key is a 400 naming \$.imagex"
else not_ok "an unknown key is a 400 naming \$.imagex" "$ST $R"; fi
api POST "/v1/sessions/$S/processes" '{"argv": ["echo", 5]}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.argv[1]'* ]]; then ok "a wrong type is a 400 naming \$.argv[1]"
else not_ok "a wrong type is a 400 naming \$.argv[1]" "$ST $R"; fi
api POST /v1/sessions '{"image": "minimal", "policy": "../../etc/x"}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.policy'* ]]; then ok "a policy path instead of a name is a 400"
else not_ok "a policy path instead of a name is a 400" "$ST $R"; fi
api POST /v1/sessions '{"image": "minimal", "tenant": "../x y"}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *'$.tenant'* ]]; then ok "a tenant that is not an id is a 400 naming \$.tenant"
else not_ok "a tenant that is not an id is a 400 naming \$.tenant" "$ST $R"; fi
api POST "/v1/sessions/$S/processes" '{"argv": ["true"], "stdin": false}'
if [ "$ST" = 201 ]; then ok "control: a good process body is taken (201)"; else not_ok "control: a good process body is taken" "$ST $R"; fi
# The library's error kind decides the status (rb_error_http_status): an unknown image is the
# caller's bad input, said with its name.
api POST /v1/sessions '{"image": "no-such-image-x"}'
if [ "$ST" = 400 ] && [[ "$(jv 'r["error"]')" == *no-such-image-x* ]]; then ok "an unknown image is a 400 naming it"
else not_ok "an unknown image is a 400 naming it" "$ST $R"; fi

# An unknown session is a 404; a live one is a 200.
api GET /v1/sessions/0123456789abcdef0123456789abcdef
a=$ST
api GET "/v1/sessions/$S"
RUN_ID=$(jv 'r["run_id"]')
if [ "$a" = 404 ] && [ "$ST" = 200 ]; then ok "an unknown session is a 404, a live one 200"
else not_ok "an unknown session is a 404, a live one 200" "unknown $a, live $ST"; fi

# session ls lists both; session rm closes one (DELETE), the other stays.
run_rbx session ls --socket "$SOCK"
if [[ "$OUT" == *"$S  run $RUN_ID"* ]] && [[ "$OUT" == *"$S2  run"* ]]; then ok "session ls lists the live sessions"
else not_ok "session ls lists the live sessions" "$(first_line "$OUT")"; fi
run_rbx session rm --socket "$SOCK" "$S2"
d=$RC
api GET "/v1/sessions/$S2"
a=$ST
api GET "/v1/sessions/$S"
if [ "$d" = 0 ] && [ "$a" = 404 ] && [ "$ST" = 200 ]; then ok "session rm closes that session; the other stays"
else not_ok "session rm closes that session; the other stays" "rm exit $d, then $a, other $ST"; fi
run_rbx session rm --socket "$SOCK" "$S2"
if [ "$RC" = 125 ] && [[ "$ERR" == *"no session"* ]]; then ok "session rm of a closed session fails (125) saying so"
else not_ok "session rm of a closed session fails (125) saying so" "exit $RC, $(first_line "$ERR")"; fi

cg_live=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$RUN_ID" 2>/dev/null | wc -l)
# SIGTERM: the daemon closes every session and exits; no sandbox process, no cgroup is left.
kill -TERM "$DPID"
wait "$DPID"
drc=$?
if [ "$drc" = 0 ] && grep -q "session $S closed (daemon stopped)" "$T/serve.log"; then ok "SIGTERM drains: the live session is closed, the daemon exits 0"
else not_ok "SIGTERM drains: the live session is closed, the daemon exits 0" "exit $drc; $(tail -n 2 "$T/serve.log" | tr '\n' ' ')"; fi
if wait_for no_marker "$MARK"; then ok "no sandbox process is left after SIGTERM"; else not_ok "no sandbox process is left after SIGTERM" "pids $(pids_with "$MARK")"; fi
cg_left=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$RUN_ID" 2>/dev/null | wc -l)
if [ "$cg_live" -gt 0 ]; then
	if [ "$cg_left" = 0 ]; then ok "no cgroup is left after SIGTERM ($cg_live while live)"; else not_ok "no cgroup is left after SIGTERM" "$cg_left left"; fi
else
	host_limit "no cgroup is left after SIGTERM" "the session had no cgroup here (no delegated hierarchy for the mode's user)"
fi
if [ ! -e "$SOCK" ]; then ok "the socket is removed at exit"; else not_ok "the socket is removed at exit"; fi

# The ledger: the session is a run, each process a step with its exact text; its end recorded.
run_rbx ledger show "$RUN_ID" --json
if printf '%s' "$OUT" | grep -qF "sleep 300; : $MARK" && printf '%s' "$OUT" | grep -q '"run_end"'; then
	ok "the ledger holds the process's exact text and the session's end"
else not_ok "the ledger holds the process's exact text and the session's end" "$(first_line "$ERR")"; fi
PUT_SHA=$(printf '%s' "put-$MARK" | sha256sum | cut -d' ' -f1)
run_rbx ledger show "$RUN_ID" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
w = [e for e in ev if e["type"] == "file_write" and e["data"]["path"] == "/workspace/put.txt"]
r = [e for e in ev if e["type"] == "file_read" and e["data"]["path"] == "/workspace/w.txt"]
sys.exit(0 if w and w[0]["data"]["sha256"] == "sha256:" + sys.argv[1] and w[0]["data"]["size"] == len("put-" + sys.argv[2]) and r and r[0]["data"]["size"] == len("got-" + sys.argv[2]) else 1)' "$PUT_SHA" "$MARK"; then
	ok "the ledger records the file write (path, size, sha256) and the read (path, size)"
else not_ok "the ledger records the file write (path, size, sha256) and the read (path, size)" "$(printf '%s' "$OUT" | grep -o '"file_[a-z]*"' | sort | uniq -c | tr '\n' ' ')"; fi
# A stdin write and a signal change a live process: each is recorded before it acts, for its
# step (the input by size and sha256, never its bytes); the unknown signal (a 400) is not.
FED_SHA=$(printf '%s' "fed-$MARK" | sha256sum | cut -d' ' -f1)
run_rbx ledger show "$RUN_ID" --json
if printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
ev = ev.get("events", ev) if isinstance(ev, dict) else ev
step = {e["data"]["text"]: e["data"]["step"] for e in ev if e["type"] == "step_start"}
i = [e["data"] for e in ev if e["type"] == "process_stdin"]
s = [e["data"] for e in ev if e["type"] == "process_signal"]
ok = (len(i) == 1 and i[0]["step"] == step.get("[\"cat\"]") and i[0]["size"] == len("fed-" + sys.argv[2])
      and i[0]["sha256"] == sys.argv[1] and i[0]["close"] is True and len(s) == 1 and s[0]["signal"] == 15
      and sys.argv[2] not in json.dumps(i))
sys.exit(0 if ok else 1)' "$FED_SHA" "$MARK"; then
	ok "the ledger records the stdin write (step, size, sha256, not its bytes) and the signal (step, 15), not the 400"
else not_ok "the ledger records the stdin write (step, size, sha256, not its bytes) and the signal (step, 15), not the 400" "$(printf '%s' "$OUT" | grep -o '"process_[a-z]*"' | sort | uniq -c | tr '\n' ' ')"; fi
run_rbx ledger show "$RUN_ID" --json
if printf '%s' "$OUT" | grep -q '"run_start"' && ! printf '%s' "$OUT" | grep -qF "never-ran-$MARK"; then ok "control: the ledger has no text that never ran"; else not_ok "control: the ledger has no text that never ran"; fi
