#!/usr/bin/env bash
# `runbox run -i`: runbox's stdin streamed into the step (EOF closes it), bounded by a fixed
# cap of 256 MiB; without -i the step's stdin is /dev/null; a manifest refuses -i.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init runstdin

# in_rbx STDIN-FILE ARGS...: runbox with stdin from a file, killed after 60 s (a hang is 124/137).
in_rbx() {
	local from=$1
	shift
	rbx_cmd "$@"
	timeout -k 5 60 "${RBX_CMD[@]}" <"$from" >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}
printf 'a\nb\n' >"$T/ab"
chmod a+r "$T/ab"

# 1. Both lines through -i; the control: the same stdin without -i reaches nothing (/dev/null).
in_rbx "$T/ab" run -i -- /bin/cat
i_rc=$RC i_out=$OUT
in_rbx "$T/ab" run -- /bin/cat
if [ "$i_rc" = 0 ] && [ "$i_out" = $'a\nb' ] && [ "$RC" = 0 ] && [ -z "$OUT" ]; then
	ok "run -i: stdin reaches the step; without -i it is /dev/null (exit 0, nothing printed)"
else not_ok "run -i" "with -i: exit $i_rc '$i_out'; without: exit $RC '$OUT' ($(first_line "$ERR"))"; fi

# 2. A step that never reads its stdin does not hold the run, though runbox's stdin never ends
# (a fifo held open by a writer that writes nothing); the control: /bin/cat on it does wait.
mkfifo "$T/fifo"
chmod a+rw "$T/fifo"
sleep 100 >"$T/fifo" &
holder=$!
start=$(date +%s)
in_rbx "$T/fifo" run -i -- /bin/true
t_rc=$RC took=$(($(date +%s) - start))
rbx_cmd run -i --timeout 3s -- /bin/cat
timeout -k 5 60 "${RBX_CMD[@]}" <"$T/fifo" >/dev/null 2>&1
c_rc=$?
kill $holder 2>/dev/null
wait $holder 2>/dev/null
if [ "$t_rc" = 0 ] && [ "$took" -lt 20 ] && [ "$c_rc" = 124 ]; then
	ok "run -i: a step that exits without reading stdin ends the run (control: cat waits until its timeout)"
else not_ok "run -i: a step not reading" "true: exit $t_rc after ${took}s; cat: exit $c_rc (want 124)"; fi

# 3. 8 MiB of random bytes pass intact (checksum both sides).
head -c $((8 << 20)) /dev/urandom >"$T/big"
chmod a+r "$T/big"
want=$(sha256sum <"$T/big" | cut -d' ' -f1)
in_rbx "$T/big" run -i -- /usr/bin/sha256sum
got=$(cut -d' ' -f1 <<<"$OUT")
if [ "$RC" = 0 ] && [ "$got" = "$want" ]; then ok "run -i: 8 MiB pass through intact (sha256)"
else not_ok "run -i: 8 MiB" "exit $RC, sha256 '$got' want '$want' ($(first_line "$ERR"))"; fi

# 4. A step that reads a little and closes its stdin: the rest is not sent, the run is not held.
in_rbx "$T/big" run -i -- /usr/bin/head -c 5
if [ "$RC" = 0 ] && [ "$(wc -c <"$T/out")" = 5 ]; then ok "run -i: a step that closes its stdin early ends normally"
else not_ok "run -i: early close" "exit $RC, $(wc -c <"$T/out") bytes ($(first_line "$ERR"))"; fi

# 5. The cap: exactly 256 MiB arrive whole and silently; one byte more is cut at the cap, with a
# warning naming it.
rbx_cmd run -i -- /usr/bin/wc -c
head -c $((256 << 20)) /dev/zero | timeout -k 5 120 "${RBX_CMD[@]}" >"$T/out" 2>"$T/err"
e_rc=$? e_out=$(cat "$T/out") e_err=$(cat "$T/err")
head -c $(((256 << 20) + 1)) /dev/zero | timeout -k 5 120 "${RBX_CMD[@]}" >"$T/out" 2>"$T/err"
o_rc=$? o_out=$(cat "$T/out") o_err=$(cat "$T/err")
if [ "$e_rc" = 0 ] && [ "$e_out" = 268435456 ] && ! grep -q cap <<<"$e_err" &&
	[ "$o_rc" = 0 ] && [ "$o_out" = 268435456 ] && grep -q "256 MiB, runbox's cap" <<<"$o_err"; then
	ok "run -i: bounded at 256 MiB (at the cap: whole, no warning; above: cut there, warned)"
else not_ok "run -i: cap" "at: $e_rc '$e_out'; above: $o_rc '$o_out' $(grep warning <<<"$o_err" | head -1)"; fi

# 6. A manifest refuses -i, naming why; the control: the same manifest runs without it.
"$PY" - "$T/m.json" <<'PYEOF'
import json, sys
json.dump({"tenant": "acme", "agent": "stdin", "image": "minimal", "steps": [{"name": "s", "script": "true"}]}, open(sys.argv[1], "w"))
PYEOF
chmod a+r "$T/m.json"
in_rbx "$T/ab" run -i "$T/m.json"
m_rc=$RC m_err=$ERR
in_rbx "$T/ab" run "$T/m.json"
if [ "$m_rc" = 125 ] && grep -q -- "-i does not combine with a manifest" <<<"$m_err" && [ "$RC" = 0 ]; then
	ok "run -i SPEC: refused with a reason (control: the manifest runs without -i)"
else not_ok "run -i SPEC" "with -i: exit $m_rc $(first_line "$m_err"); without: exit $RC"; fi
