#!/usr/bin/env bash
# runbox serve's terminals and output stream (docs/serve.md), each against a control: a tty
# process is on a terminal of the asked size and follows a resize (a plain one is on none); a
# resize without a terminal is a 409; the NDJSON stream gives the chunks in order as they come,
# then the end (the long-poll gives the same bytes); a client hanging up mid-stream leaves the
# process running to its end; `runbox exec -i` forwards stdin, `-t` gives a terminal under a pty.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_tty

serve_client
CLI_PY=$(dirname "$0")/serve_tty_client.py

# output_of PID: every chunk of a process by long-poll until it exited; R the last reply, OUTB
# the stdout text of all chunks, SEQS their seqs, STREAMS their streams.
output_of() {
	local after=0 i
	OUTB="" SEQS="" STREAMS=""
	for i in $(seq 1 60); do
		api GET "/v1/sessions/$S/processes/$1/output?after_seq=$after&wait_ms=2000"
		OUTB+=$(jv '"".join(c["data"] for c in r["chunks"] if c["stream"] == "stdout")'; printf x)
		OUTB=${OUTB%$'\n'x} # jv's own newline and the guard against $( ) eating the output's
		SEQS+="$(jv '" ".join(str(c["seq"]) for c in r["chunks"])') "
		STREAMS+="$(jv '" ".join(c["stream"] for c in r["chunks"])') "
		after=$(jv 'r["next_seq"]')
		[ "$(jv 'r["exited"]')" = true ] && return 0
	done
	return 1
}

if [ "$MODE" = user ]; then rbx_cmd serve; else rbx_cmd serve --socket "$SOCK"; fi
"${RBX_CMD[@]}" </dev/null >"$T/serve.log" 2>&1 &
DPID=$!
if ! wait_for test -S "$SOCK"; then
	not_ok "runbox serve listens on $SOCK" "$(first_line "$(cat "$T/serve.log")")"
	kill "$DPID" 2>/dev/null
	exit 0
fi
rbx_cmd session create --socket "$SOCK" --image minimal
S=$("${RBX_CMD[@]}" 2>"$T/err")
if [[ "$S" =~ ^[0-9a-f]{32}$ ]]; then ok "a session is made"
else not_ok "a session is made" "got '$S' ($(first_line "$(cat "$T/err")"))"; kill "$DPID"; exit 0; fi

# A tty process: on a terminal of the size asked, then of the size a resize gave (the resize
# comes once the first size is printed; a line typed into the terminal lets it go on).
api POST "/v1/sessions/$S/processes" '{"argv": ["sh", "-c", "[ -t 0 ] && echo TTY || echo NOTTY; stty size; echo to-err >&2; read x; stty size; echo got-$x"], "tty": true, "size": {"rows": 33, "cols": 101}}'
TP=$(jv 'r["id"]')
[ "$ST" = 201 ] || not_ok "a tty process starts" "HTTP $ST $R"
for i in $(seq 1 50); do
	api GET "/v1/sessions/$S/processes/$TP/output?wait_ms=200"
	jv '"".join(c["data"] for c in r["chunks"])' | grep -q '33 101' && break
done
api POST "/v1/sessions/$S/processes/$TP/resize" '{"rows": 40, "cols": 120}'
rst=$ST
api POST "/v1/sessions/$S/processes/$TP/stdin" $'typed\n'
output_of "$TP"
res_tty=$(jv 'r["result"]["tty"]')
streams=$(tr ' ' '\n' <<<"$STREAMS" | sort -u | xargs)
if [ "$rst" = 200 ] && printf '%s' "$OUTB" | grep -q '^TTY' && printf '%s' "$OUTB" | grep -q '^33 101' &&
	printf '%s' "$OUTB" | grep -q '^40 120' && printf '%s' "$OUTB" | grep -q 'got-typed' && printf '%s' "$OUTB" | grep -q 'to-err' && [ "$res_tty" = true ] && [ "$streams" = stdout ]; then
	ok "a tty process is on a terminal ([ -t 0 ]), of the size asked (33 101), then resized (40 120); typed input reaches it; its stderr is in stream stdout; result tty: true"
else not_ok "a tty process is on a terminal of the size asked, then resized" "resize HTTP $rst, out '$(printf '%s' "$OUTB" | tr '\r\n' '  ')', tty $res_tty, streams '$streams'"; fi
api POST "/v1/sessions/$S/processes" '{"argv": ["sh", "-c", "[ -t 0 ] && echo TTY || echo NOTTY; stty size 2>&1 || echo no-size; echo to-err >&2"]}'
NP=$(jv 'r["id"]')
output_of "$NP"
if printf '%s' "$OUTB" | grep -q '^NOTTY' && printf '%s' "$OUTB" | grep -q 'no-size' && [ "$(jv 'r["result"].get("tty", False)')" = false ] && [[ "$STREAMS" == *stderr* ]]; then
	ok "control: a process without tty is on no terminal (stty size fails), its stderr in stream stderr"
else not_ok "control: a process without tty is on no terminal" "out '$OUTB'"; fi

# A resize: 409 without a terminal, 409 once ended; bad sizes are 400s naming the key.
api POST "/v1/sessions/$S/processes" '{"argv": ["sleep", "5"]}'
SP=$(jv 'r["id"]')
api POST "/v1/sessions/$S/processes/$SP/resize" '{"rows": 10, "cols": 10}'
if [ "$ST" = 409 ] && jv 'r["error"]' | grep -q 'no terminal'; then ok "a resize of a process without a terminal is a 409 (no terminal)"
else not_ok "a resize of a process without a terminal is a 409" "HTTP $ST $R"; fi
api POST "/v1/sessions/$S/processes/$TP/resize" '{"rows": 10, "cols": 10}'
if [ "$ST" = 409 ] && jv 'r["error"]' | grep -q 'ended'; then ok "a resize of an ended tty process is a 409 (ended)"
else not_ok "a resize of an ended tty process is a 409" "HTTP $ST $R"; fi
bad_ok=1
for b in '{"rows": 0, "cols": 10}|$.rows' '{"rows": 10}|$.cols' '{"rows": 10, "cols": 10, "x": 1}|$.x' '{"rows": 10, "cols": "10"}|$.cols'; do
	api POST "/v1/sessions/$S/processes/$SP/resize" "${b%|*}"
	{ [ "$ST" = 400 ] && jv 'r["error"]' | grep -qF "${b#*|}"; } || { bad_ok=0; echo "# ${b%|*}: HTTP $ST $R"; }
done
for b in '{"argv": ["true"], "size": {"rows": 3, "cols": 4}}|$.size' '{"argv": ["true"], "tty": true, "size": {"rows": 3, "cols": 70000}}|$.size.cols' '{"argv": ["true"], "tty": 1}|$.tty' '{"argv": ["true"], "tty": true, "size": {"rows": 3, "cols": 4, "depth": 1}}|$.size.depth'; do
	api POST "/v1/sessions/$S/processes" "${b%|*}"
	{ [ "$ST" = 400 ] && jv 'r["error"]' | grep -qF "${b#*|}"; } || { bad_ok=0; echo "# ${b%|*}: HTTP $ST $R"; }
done
api POST "/v1/sessions/$S/processes" '{"argv": ["true"], "tty": true, "size": {"rows": 3, "cols": 4}}'
if [ "$bad_ok" = 1 ] && [ "$ST" = 201 ]; then ok "bad sizes and a size without tty are 400s naming the key (control: a good one starts, 201)"
else not_ok "bad sizes and a size without tty are 400s naming the key" "control HTTP $ST"; fi

# The NDJSON stream: chunks in order as they come (the first well before the end), then the
# exited line; the long-poll of the same process gives the same bytes.
api POST "/v1/sessions/$S/processes" '{"argv": ["sh", "-c", "echo first; sleep 3; for i in 1 2 3 4 5; do echo line$i; done; echo to-err >&2; exit 4"]}'
OP=$(jv 'r["id"]')
"${CLIENT[@]}" "$PY" "$CLI_PY" stream "$SOCK" "/v1/sessions/$S/processes/$OP/output?stream=1" plain all >"$T/nd" 2>"$T/nd.err"
verdict=$("$PY" - "$T/nd" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
head, lines = rows[0], rows[1:]
chunks = [l for t, l in lines if "seq" in l]
last = lines[-1][1] if lines else {}
seqs = [c["seq"] for c in chunks]
out = "".join(c["data"] for c in chunks if c["stream"] == "stdout")
err = "".join(c["data"] for c in chunks if c["stream"] == "stderr")
first_at = next(t for t, l in lines if "seq" in l)
bad = []
if head["status"] != 200 or head["type"] != "application/x-ndjson" or head["chunked"] != "chunked": bad.append("head %s" % head)
if seqs != sorted(seqs) or seqs[0] != 1 or len(set(seqs)) != len(seqs): bad.append("seqs %s" % seqs)
if out != "first\n" + "".join("line%d\n" % i for i in range(1, 6)) or err != "to-err\n": bad.append("out %r err %r" % (out, err))
if not last.get("exited") or last["result"]["exit"] != 4: bad.append("last %s" % last)
if first_at > 2.5 or lines[-1][0] - first_at < 1.0: bad.append("first line at %.2fs, last at %.2fs" % (first_at, lines[-1][0]))
print("ok" if not bad else "; ".join(bad))
PYEOF
)
if [ "$verdict" = ok ]; then ok "the NDJSON stream gives chunks in order as they come (chunked, application/x-ndjson), then {exited, result}"
else not_ok "the NDJSON stream gives chunks in order as they come, then the end" "$verdict $(first_line "$(cat "$T/nd.err")")"; fi
output_of "$OP"
nd_out=$("$PY" -c 'import json,sys; print("".join(l[1]["data"] for l in map(json.loads, list(open(sys.argv[1]))[1:]) if l[1].get("stream") == "stdout"), end="")' "$T/nd"; printf x)
nd_out=${nd_out%x}
if [ "$OUTB" = "$nd_out" ] && [ -n "$OUTB" ] && [ "$(jv 'r["result"]["exit"]')" = 4 ]; then ok "control: the long-poll gives the same bytes and result"
else not_ok "control: the long-poll gives the same bytes" "poll '$OUTB' stream '$nd_out'"; fi
# after_seq is honoured, and Accept: application/x-ndjson asks for the stream too.
"${CLIENT[@]}" "$PY" "$CLI_PY" stream "$SOCK" "/v1/sessions/$S/processes/$OP/output?after_seq=2" accept all >"$T/nd2" 2>&1
first_seq=$("$PY" -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1])]; print(l[1][1].get("seq"), l[-1][1].get("exited"))' "$T/nd2" 2>/dev/null)
if [ "$first_seq" = "3 True" ]; then ok "after_seq=2 starts the stream at seq 3 (asked for by Accept), then the end"
else not_ok "after_seq=2 starts the stream at seq 3 (asked for by Accept)" "got '$first_seq' $(first_line "$(cat "$T/nd2")")"; fi
api GET "/v1/sessions/$S/processes/$OP/output?stream=1&after_seq=0"
api GET "/v1/sessions/$S/processes/nosuch/output?stream=1"
if [ "$ST" = 404 ]; then ok "the stream of an unknown process is a 404"; else not_ok "the stream of an unknown process is a 404" "HTTP $ST"; fi

# A client that hangs up mid-stream: the process runs to its end and its result is recorded.
MARK=$(new_marker)
api POST "/v1/sessions/$S/processes" "{\"argv\": [\"sh\", \"-c\", \"echo start; sleep 2; echo $MARK > /workspace/end; echo end\"]}"
DP=$(jv 'r["id"]')
"${CLIENT[@]}" "$PY" "$CLI_PY" stream "$SOCK" "/v1/sessions/$S/processes/$DP/output?stream=1" plain first >"$T/nd3" 2>&1
api POST "/v1/sessions/$S/processes" "{\"argv\": [\"sh\", \"-c\", \"echo start; sleep 2; echo $MARK > /workspace/end2; echo end\"]}"
KP=$(jv 'r["id"]')
"${CLIENT[@]}" "$PY" "$CLI_PY" stream "$SOCK" "/v1/sessions/$S/processes/$KP/output?stream=1" plain first >/dev/null 2>&1
api POST "/v1/sessions/$S/processes/$KP/signal" '{"signal": "KILL"}'
output_of "$DP"
dres=$(jv 'r["result"]["status"]')
dout=$OUTB
output_of "$KP"
kres=$(jv 'r["result"]["status"]')
api GET "/v1/sessions/$S/files?path=/workspace/end"
endf=$R
api GET "/v1/sessions/$S/files?path=/workspace/end2"
end2=$ST
if grep -q '"start' "$T/nd3" && [ "$dres" = exited ] && [ "$endf" = "$MARK"$'\n' ] && [ "$dout" = $'start\nend\n' ]; then
	ok "a client gone mid-stream leaves the process running to its end (its file written, result exited)"
else not_ok "a client gone mid-stream leaves the process running to its end" "first '$(head -c 200 "$T/nd3")', result $dres, file '$endf', out '$dout'"; fi
if [ "$kres" = signaled ] && [ "$end2" = 404 ]; then ok "control: the same process killed mid-way writes no file (result signaled)"
else not_ok "control: the same process killed mid-way writes no file" "result $kres, file HTTP $end2"; fi
# Each stream is a thread of the daemon while its client holds it; a client killed mid-stream
# ends its thread (the daemon polls the client between waits), and the process runs on.
api POST "/v1/sessions/$S/processes" '{"argv": ["sh", "-c", "echo start; sleep 30"]}'
LP=$(jv 'r["id"]')
threads() { ls "/proc/$DPID/task" | wc -l; }
n0=$(threads)
cpids=()
for _ in 1 2 3 4 5; do
	"${CLIENT[@]}" "$PY" "$CLI_PY" stream "$SOCK" "/v1/sessions/$S/processes/$LP/output?stream=1" plain all >/dev/null 2>&1 &
	cpids+=($!)
done
wait_for sh -c "[ \$(ls /proc/$DPID/task | wc -l) -ge $((n0 + 5)) ]"
n1=$(threads)
kill "${cpids[@]}" 2>/dev/null
wait "${cpids[@]}" 2>/dev/null
wait_for sh -c "[ \$(ls /proc/$DPID/task | wc -l) -le $n0 ]"
wait_for sh -c "[ \$(ls /proc/$DPID/task | wc -l) -le $n0 ]"
n2=$(threads)
api GET "/v1/sessions/$S/processes/$LP"
lstate=$(jv 'r["state"]')
if [ "$n1" -ge $((n0 + 5)) ] && [ "$n2" -le "$n0" ] && [ "$lstate" = running ]; then
	ok "five streams are five threads ($n0 -> $n1); their clients killed, the threads end ($n2) and the process runs on"
else not_ok "streams' threads end with their clients, the process runs on" "threads $n0 -> $n1 -> $n2, state $lstate"; fi
api POST "/v1/sessions/$S/processes/$LP/signal" '{"signal": "KILL"}'

# The ledger: the step of the process whose client hung up has its end, exit 0.
api GET "/v1/sessions/$S"
RUN_ID=$(jv 'r["run_id"]')
step_ended() {
	run_rbx ledger show "$RUN_ID" --json
	printf '%s' "$OUT" | "$PY" -c '
import json, sys
ev = json.load(sys.stdin)
st = [e["data"]["step"] for e in ev if e["type"] == "step_start" and sys.argv[1] in e["data"]["text"]]
en = [e["data"] for e in ev if e["type"] == "step_end" and st and e["data"]["step"] == st[0]]
sys.exit(0 if en and en[0]["exit_code"] == int(sys.argv[2]) else 1)' "$1" "$2"
}
if wait_for step_ended "$MARK > /workspace/end;" 0; then ok "the ledger holds its end (exit 0)"
else not_ok "the ledger holds its end (exit 0)" "$(first_line "$ERR")"; fi
if ! step_ended "$MARK > /workspace/end;" 1; then ok "control: the ledger's check fails on another exit code"
else not_ok "control: the ledger's check fails on another exit code"; fi

# runbox exec -i: stdin goes through; without -i the command's stdin is empty.
echo "hi-$MARK" >"$T/in"
RBX_STDIN=$T/in run_rbx exec --socket "$SOCK" -i "$S" -- cat
if [ "$RC" = 0 ] && [ "$OUT" = "hi-$MARK" ]; then ok "exec -i passes stdin through (cat echoes it)"
else not_ok "exec -i passes stdin through" "exit $RC, out '$OUT' ($(first_line "$ERR"))"; fi
RBX_STDIN=$T/in run_rbx exec --socket "$SOCK" "$S" -- cat
if [ "$RC" = 0 ] && [ -z "$OUT" ]; then ok "control: without -i the command reads no stdin"
else not_ok "control: without -i the command reads no stdin" "exit $RC, out '$OUT'"; fi
run_rbx exec --socket "$SOCK" -t "$S" -- true
if [ "$RC" = 125 ] && grep -q 'not a TTY' <<<"$ERR"; then ok "exec -t without a terminal on stdin: 125 (not a TTY)"
else not_ok "exec -t without a terminal on stdin: 125" "exit $RC ($(first_line "$ERR"))"; fi

# runbox exec -it under a pty: the command is on a terminal of the pty's size, resized with it
# (SIGWINCH), and a key typed reaches it; without -t, on none.
rbx_cmd exec --socket "$SOCK" -it "$S" -- sh -c '[ -t 0 ] && echo TTY || echo NOTTY; stty size; read x; stty size; exit 5'
"$PY" "$CLI_PY" pty 27 91 30x100 "${RBX_CMD[@]}" >"$T/pty" 2>&1
pv=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); o=r["out"]; print("ok" if "TTY" in o and "NOTTY" not in o and "27 91" in o and "30 100" in o and r["exit"] == 5 else repr(r))' "$T/pty" 2>&1)
if [ "$pv" = ok ]; then ok "exec -it under a pty: a terminal of its size (27 91), resized with it (30 100), exit 5 passed through"
else not_ok "exec -it under a pty: a terminal of its size, resized with it" "$pv"; fi
rbx_cmd exec --socket "$SOCK" "$S" -- sh -c '[ -t 0 ] && echo TTY || echo NOTTY'
"$PY" "$CLI_PY" pty 27 91 0 "${RBX_CMD[@]}" >"$T/pty2" 2>&1
pv=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print("ok" if "NOTTY" in r["out"] and r["exit"] == 0 else repr(r))' "$T/pty2" 2>&1)
if [ "$pv" = ok ]; then ok "control: exec without -t under the same pty gives the command no terminal"
else not_ok "control: exec without -t under the same pty gives the command no terminal" "$pv"; fi

kill -TERM "$DPID"
wait "$DPID"
