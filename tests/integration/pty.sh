#!/usr/bin/env bash
# `runbox run -t` / `-it`: the step gets a terminal of the sandbox's own devpts (its controlling
# terminal, sized as the caller's and following it); keys typed reach it, ^C there is its
# SIGINT, TIOCSTI on it is refused; the caller's terminal is raw while it runs and restored
# after, also when runbox is killed by a signal. runbox runs on a host pty that a python driver
# holds (pty.fork), as it would in a terminal emulator.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init pty

# drive.py ACTION... -- CMD...: CMD on a new host pty of 30x100 (its session leader, the pty
# its controlling terminal). Actions, in order: expect:TEXT (wait up to 20 s, or the seconds of
# the last within:SECS, for TEXT in the output; `[never saw 'TEXT']` if it did not come), send:BYTES (python escapes: \r, \x03), size:RxC (resize the host pty: SIGWINCH),
# mode (print whether the pty is raw now), procs:EXE (print how many processes run EXE),
# ctty (print CMD's controlling terminal, tty_nr of /proc/PID/stat), cook (the pty's settings
# of the start again, as a shell sets them when a job stops), sleep:SECS,
# kill:SIG (to CMD), wait (for its end, up to 60 s). Carriage returns are dropped.
# Prints the output, then `[exit N]` and `[restored yes|no]` (the pty's settings as at start).
cat >"$T/drive.py" <<'PYEOF'
import fcntl, os, pty, select, signal, struct, sys, termios, time
args = sys.argv[1:]
cut = args.index('--')
acts, cmd = args[:cut], args[cut + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 30, 100, 0, 0))
start = termios.tcgetattr(fd)
out = b''
notes = []
within = 20
def pump(until, want=None):
    global out
    while time.time() < until:
        if want is not None and want in out:
            return True
        r, _, _ = select.select([fd], [], [], 0.05)
        if not r:
            continue
        try:
            d = os.read(fd, 65536)
        except OSError:  # EIO: every holder of the slave is gone
            return False
        if not d:
            return False
        out += d
    return want is not None and want in out
for a in acts:
    kind, _, arg = a.partition(':')
    if kind == 'within':
        within = float(arg)
    elif kind == 'expect':
        if not pump(time.time() + within, arg.encode()):
            notes.append('[never saw %r]' % arg)
    elif kind == 'send':
        os.write(fd, arg.encode().decode('unicode_escape').encode('latin1'))
    elif kind == 'size':
        r, c = arg.split('x')
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', int(r), int(c), 0, 0))
    elif kind == 'mode':
        notes.append('[raw %s]' % ('no' if termios.tcgetattr(fd)[3] & termios.ICANON else 'yes'))
    elif kind == 'procs':
        n = 0
        for d in os.listdir('/proc'):
            try:
                n += d.isdigit() and os.readlink('/proc/%s/exe' % d) == arg
            except OSError:
                pass
        notes.append('[procs %d]' % n)
    elif kind == 'ctty':  # CMD's controlling terminal, as /proc/PID/stat's tty_nr
        notes.append('[ctty %s]' % open('/proc/%d/stat' % pid).read().rsplit(')', 1)[1].split()[4])
    elif kind == 'cook':  # what a shell does when a job stops: its own (cooked) modes back
        termios.tcsetattr(fd, termios.TCSANOW, start)
    elif kind == 'sleep':
        pump(time.time() + float(arg))
    elif kind == 'kill':
        os.kill(pid, getattr(signal, arg))
    elif kind == 'wait':
        pump(time.time() + 60)
end = time.time() + 60
while time.time() < end:
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    pump(time.time() + 0.2)
else:
    os.kill(pid, signal.SIGKILL)
    done, st = os.waitpid(pid, 0)
    notes.append('[killed after 60 s]')
restored = termios.tcgetattr(fd) == start
pump(time.time() + 0.2)
sys.stdout.write(out.decode('utf-8', 'replace').replace('\r', ''))
print('\n' + '\n'.join(notes))
print('[exit %d]' % os.waitstatus_to_exitcode(st))
print('[restored %s]' % ('yes' if restored else 'no'))
PYEOF

# on_pty ACTION... -- RUNBOX-ARGS...: runbox in this mode on the driver's pty; sets OUT, RC.
on_pty() {
	local acts=()
	while [ "$1" != -- ]; do
		acts+=("$1")
		shift
	done
	shift
	rbx_cmd "$@"
	OUT=$("$PY" "$T/drive.py" "${acts[@]}" -- "${RBX_CMD[@]}" 2>&1)
	RC=$(sed -n 's/^\[exit \(-\{0,1\}[0-9]*\)\]$/\1/p' <<<"$OUT")
}
has() { grep -qF -- "$1" <<<"$OUT"; }

# 1. tty names the sandbox's pty; the control: without -t the step has no terminal.
on_pty wait -- run -t -- tty
t_rc=$RC t_out=$OUT
on_pty wait -- run -- tty
if [ "$t_rc" = 0 ] && grep -qE '^/dev/pts/[0-9]+$' <<<"$t_out" && [ "$RC" = 1 ] && has "not a tty"; then
	ok "run -t: the step's stdin is a pty of the sandbox (control: without -t, 'not a tty')"
else not_ok "run -t: tty" "with -t: exit $t_rc $(head -3 <<<"$t_out" | tr '\n' ' '); without: exit $RC $(first_line "$OUT")"; fi

# 2. The terminal is the step's controlling terminal: /dev/tty opens (ENXIO without one),
# ps names it, and the step leads its foreground group; the control: without -t none of it.
tty_check='{ exec 3<>/dev/tty; } 2>/dev/null && echo ctty:yes; ps -o tty= -p $$ | grep -q pts/ && echo ps:pts; [ -t 0 ] && echo t0:yes; true'
on_pty wait -- run -t -- /bin/sh -c "$tty_check"
c_out=$OUT c_rc=$RC
on_pty wait -- run -- /bin/sh -c "$tty_check"
if [ "$c_rc" = 0 ] && grep -q ctty:yes <<<"$c_out" && grep -q ps:pts <<<"$c_out" && grep -q t0:yes <<<"$c_out" &&
	! has ctty:yes && ! has ps:pts && ! has t0:yes; then
	ok "run -t: the pty is the step's controlling terminal (/dev/tty opens, ps shows it; control: without -t it does not)"
else not_ok "run -t: controlling terminal" "with -t: exit $c_rc $(tr '\n' ' ' <<<"$c_out" | cut -c1-200); without: $(tr '\n' ' ' <<<"$OUT" | cut -c1-200)"; fi

# 3. stty size is the caller's terminal's (30x100, not the 24x80 default), and follows a resize
# of it, with SIGWINCH to the step.
on_pty expect:ready size:40x120 wait -- run -it -- /bin/sh -c \
	'trap "echo winch; echo \"then \$(stty size)\"; exit 0" WINCH; echo "first $(stty size)"; echo ready; while :; do sleep 0.1; done'
if [ "$RC" = 0 ] && has "first 30 100" && has winch && has "then 40 120"; then
	ok "run -it: stty size is the caller's (30 100) and follows its resize (40 120, SIGWINCH)"
else not_ok "run -it: size" "exit $RC: $(tr '\n' ' ' <<<"$OUT" | cut -c1-300)"; fi

# 4. Keys typed reach the program, the caller's terminal raw meanwhile and restored after; the
# control: -t without -i gives a terminal but forwards nothing (the read waits out its timeout).
on_pty expect:ready mode 'send:hello\r' wait -- run -it -- /bin/sh -c 'echo ready; read -r x; echo "got:$x"'
i_out=$OUT i_rc=$RC
on_pty expect:ready 'send:hello\r' wait -- run -t --timeout 3s -- /bin/sh -c 'echo ready; read -r x; echo "got:$x"'
if [ "$i_rc" = 0 ] && grep -q "got:hello" <<<"$i_out" && grep -qF "[raw yes]" <<<"$i_out" &&
	grep -qF "[restored yes]" <<<"$i_out" && [ "$RC" = 124 ] && ! has "got:hello"; then
	ok "run -it: typed input reaches the program; our terminal raw meanwhile, restored after (control: -t alone forwards none)"
else not_ok "run -it: input" "-it: exit $i_rc $(tr '\n' ' ' <<<"$i_out" | cut -c1-200); -t: exit $RC $(tr '\n' ' ' <<<"$OUT" | cut -c1-200)"; fi

# 5. ^C is a byte (0x03) that the step's terminal turns into SIGINT for its foreground group;
# the control: with ISIG off there (stty -isig -icanon) the same byte is read as data.
on_pty expect:ready 'send:\x03' wait -- run -it -- /bin/sh -c 'trap "echo caught-int; exit 7" INT; echo ready; while :; do sleep 0.1; done'
s_out=$OUT s_rc=$RC
on_pty expect:ready 'send:\x03' wait -- run -it -- /bin/sh -c 'stty -isig -icanon min 1; trap "echo caught-int; exit 7" INT; echo ready; dd bs=1 count=1 2>/dev/null | od -An -tx1'
if [ "$s_rc" = 7 ] && grep -q caught-int <<<"$s_out" && [ "$RC" = 0 ] && has " 03" && ! has caught-int; then
	ok "run -it: ^C (0x03) through the pty is the step's SIGINT (control: with -isig it is the byte 03)"
else not_ok "run -it: ^C" "isig: exit $s_rc $(tr '\n' ' ' <<<"$s_out" | cut -c1-200); -isig: exit $RC $(tr '\n' ' ' <<<"$OUT" | cut -c1-200)"; fi

# 6. What is typed shows as it is typed: the terminal's echo of a word is not held back by the
# scrubber until the next space (held bytes go out once the output pauses). The control: with
# the terminal's echo off (stty -echo) the word never shows, so what showed was the echo.
on_pty expect:ready within:5 send:abcdef expect:abcdef 'send:\r' wait -- run -it -- /bin/sh -c 'echo ready; read -r x; echo "got:$x"'
e_out=$OUT e_rc=$RC
on_pty expect:ready within:3 send:abcdef expect:abcdef 'send:\r' wait -- run -it -- /bin/sh -c 'stty -echo; echo ready; read -r x; echo "got:$x"'
if [ "$e_rc" = 0 ] && ! grep -qF "[never saw" <<<"$e_out" && grep -q got:abcdef <<<"$e_out" &&
	[ "$RC" = 0 ] && has "[never saw 'abcdef']" && has got:abcdef; then
	ok "run -it: a typed word is echoed before it ends (control: with stty -echo it is not shown, only read)"
else not_ok "run -it: echo" "echo: exit $e_rc $(tr '\n' ' ' <<<"$e_out" | cut -c1-200); -echo: exit $RC $(tr '\n' ' ' <<<"$OUT" | cut -c1-200)"; fi

# 7. The terminal's output is scrubbed as a pipe's: the run token printed there is redacted; the
# control: it was there to redact (its length).
on_pty wait -- run -t --net gateway -- /bin/sh -c 'echo "tok=$RUNBOX_TOKEN"; echo "len=${#RUNBOX_TOKEN}"'
len=$(sed -n 's/^len=\([0-9]*\)$/\1/p' <<<"$OUT")
if [ "$RC" = 0 ] && has "tok=[REDACTED:" && [ "${len:-0}" -gt 20 ]; then
	ok "run -t: the run token printed on the terminal is redacted (control: it is $len bytes long)"
else not_ok "run -t: scrub" "exit $RC: $(tr '\n' ' ' <<<"$OUT" | cut -c1-300)"; fi

# 8. TIOCSTI on the step's own terminal is refused by the seccomp filter (EPERM); the control:
# the same probe on the host's pty (a session leader's controlling terminal) succeeds, or meets
# the kernel's own refusal (EIO) where dev.tty.legacy_tiocsti is 0: never seccomp's EPERM.
legacy=$(cat /proc/sys/dev/tty/legacy_tiocsti 2>/dev/null || echo 1)
want_ctrl=0
[ "$legacy" = 0 ] && want_ctrl=5
OUT=$("$PY" "$T/drive.py" wait -- "$PROBE" ioctl-tiocsti-stdin 2>&1)
ctrl=$(sed -n 's/^\[exit \([0-9]*\)\]$/\1/p' <<<"$OUT")
on_pty wait -- run -t --image minimal -- /bin/probe ioctl-tiocsti-stdin
if [ "$RC" = "$EPERM" ] && [ "$ctrl" = "$want_ctrl" ]; then
	ok "run -t: TIOCSTI on the step's pty is refused (EPERM; control: on the host's pty exit $ctrl)"
else not_ok "run -t: TIOCSTI" "inside: exit $RC (want $EPERM); host control: exit $ctrl (want $want_ctrl)"; fi

# 9. -t wants a terminal on runbox's stdin, as docker's; -tt forces one; the result says tty.
run_rbx run -t -- /bin/true
n_rc=$RC n_err=$ERR
run_rbx run -tt --json -- tty
f_rc=$RC f_tty=$(json "$T/out" tty) f_out=$(json "$T/out" stdout) f_id=$(json "$T/out" run_id)
run_rbx run --json -- /bin/true
c_id=$(json "$T/out" run_id) c_tty=$(json "$T/out" tty 2>/dev/null || echo absent)
# step_end_tty RUN: the tty of the run's step_end in the ledger (absent when it has none).
step_end_tty() {
	run_rbx ledger query --json --run "$1" --type step_end
	"$PY" -c 'import json,sys; e=json.load(open(sys.argv[1])); print(str(e[0]["data"].get("tty", "absent")).lower() if e else "none")' "$T/out"
}
l_tty=$(step_end_tty "$f_id") lc_tty=$(step_end_tty "$c_id")
if [ "$n_rc" = 125 ] && grep -q "the input device is not a TTY" <<<"$n_err" && [ "$f_rc" = 0 ] &&
	[ "$f_tty" = true ] && grep -qE '^/dev/pts/[0-9]+' <<<"$f_out" && [ "$c_tty" = absent ] &&
	[ "$l_tty" = true ] && [ "$lc_tty" = absent ]; then
	ok "run -t without a terminal: 125 'the input device is not a TTY'; -tt forces one; result and ledger say tty: true (not without)"
else not_ok "run -t without a terminal" "-t: $n_rc $(first_line "$n_err"); -tt: $f_rc tty=$f_tty '$f_out' ledger=$l_tty; control: tty=$c_tty ledger=$lc_tty"; fi

# 10. The end of the terminal's output is its end (EIO on the master once the step exits), not
# an error: every line of a long output arrives, the exit code is the step's.
on_pty wait -- run -t -- /bin/sh -c 'seq 1 30000; exit 3'
if [ "$RC" = 3 ] && has $'\n30000\n' && [ "$(grep -cE '^[0-9]+$' <<<"$OUT")" = 30000 ] && ! has error; then
	ok "run -t: all 30000 lines arrive before the end; the step's exit code (3) is runbox's"
else not_ok "run -t: EOF" "exit $RC, $(grep -cE '^[0-9]+$' <<<"$OUT") lines: $(tail -3 <<<"$OUT" | tr '\n' ' ')"; fi

# 11. Stopped and continued (SIGSTOP, SIGCONT: ^Z is the step's byte, so a stop comes from
# outside), runbox puts the terminal back in raw mode, which the shell in between set cooked;
# the control: cooked it was, until the SIGCONT.
on_pty expect:ready kill:SIGSTOP cook mode kill:SIGCONT sleep:0.5 mode 'send:x\r' wait -- run -it -- /bin/sh -c 'echo ready; read -r x; echo "got:$x"'
modes=$(grep -oE '\[raw (yes|no)\]' <<<"$OUT" | tr '\n' ' ')
if [ "$RC" = 0 ] && [ "$modes" = "[raw no] [raw yes] " ] && has got:x && has "[restored yes]"; then
	ok "run -it stopped and continued: raw again after SIGCONT (control: cooked before it)"
else not_ok "run -it SIGCONT" "exit $RC, modes: $modes $(grep -F '[' <<<"$OUT" | tr '\n' ' ')"; fi

# 12. No host terminal is the controlling terminal of anything in the sandbox, init's included
# (init leaves the runner's session); the control: runbox itself has the host pty as its own.
on_pty expect:init-tty ctty 'send:\r' wait -- run -- /bin/sh -c 'echo "init-tty $(cut -d" " -f7 /proc/1/stat) step-tty $(cut -d" " -f7 /proc/self/stat)"; sleep 1'
rb_tty=$(sed -n 's/^\[ctty \([0-9]*\)\]$/\1/p' <<<"$OUT")
if [ "$RC" = 0 ] && has "init-tty 0 step-tty 0" && [ -n "$rb_tty" ] && [ "$rb_tty" != 0 ]; then
	ok "no host tty inside: init's and the step's controlling terminal are none (control: runbox's is $rb_tty)"
else not_ok "no host tty inside" "exit $RC $(grep -E 'init-tty|ctty' <<<"$OUT" | tr '\n' ' ')"; fi

# runbox_procs: processes of this runbox binary (the runner, its factory, the sandbox's init).
runbox_procs() {
	local exe n=0 p
	exe=$(readlink -f "$RUNBOX")
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$exe" ] && n=$((n + 1))
	done
	echo "$n"
}

# 13. Killed by a signal it does not catch (SIGUSR1), runbox restores the terminal first; then
# nothing of it is left. The control: while it ran the terminal was raw and runbox's processes
# were there to count.
exe=$(readlink -f "$RUNBOX")
before=$(runbox_procs)
on_pty expect:ready mode "procs:$exe" kill:SIGUSR1 wait -- run -it -- /bin/sh -c 'echo ready; sleep 100'
k_out=$OUT k_rc=$RC
during=$(sed -n 's/^\[procs \([0-9]*\)\]$/\1/p' <<<"$k_out")
sleep 1
after=$(runbox_procs)
if [ "$k_rc" = -10 ] && grep -qF "[raw yes]" <<<"$k_out" && grep -qF "[restored yes]" <<<"$k_out" &&
	[ "$during" -gt "$before" ] && [ "$after" = "$before" ]; then
	ok "run -it killed by SIGUSR1: the terminal was raw, is restored, no runbox process is left ($during during, $after after)"
else not_ok "run -it killed" "exit $k_rc $(grep -F '[' <<<"$k_out" | tr '\n' ' '); runbox processes: $before before, $during during, $after after"; fi

# 14. After a run ends (SIGTERM: the cancel), no runbox process is left; the control: during
# the run there were some to see.
on_pty expect:ready "procs:$exe" kill:SIGTERM wait -- run -it -- /bin/sh -c 'echo ready; sleep 100'
during=$(sed -n 's/^\[procs \([0-9]*\)\]$/\1/p' <<<"$OUT")
sleep 0.5
after=$(runbox_procs)
if [ "$RC" = 143 ] && grep -qF "[restored yes]" <<<"$OUT" && [ "$during" -gt "$before" ] && [ "$after" = "$before" ]; then
	ok "run -it cancelled by SIGTERM: exit 143, terminal restored, no runbox process left"
else not_ok "run -it cancelled" "exit $RC $(grep -F '[' <<<"$OUT" | tr '\n' ' '); runbox processes: $before before, $after after"; fi
run_rbx gc >/dev/null 2>&1 # what the SIGUSR1 kill left in the run dir
