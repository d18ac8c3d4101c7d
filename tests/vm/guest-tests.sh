#!/bin/sh
# Runs inside the VM (tests/vm/run.sh), as root, on a cgroup v2-only kernel: the cgroup v2
# limits through `runbox run` and the core isolation checks, each with a control. Prints one
# PASS/FAIL line per check and finally "VMTEST: N passed, M failed".
RB=${RB:-/opt/runbox/runbox}
P=0
F=0
T=/tmp/vmtest
mkdir -p "$T"
pass() { P=$((P + 1)); echo "PASS: $*"; }
fail() { F=$((F + 1)); echo "FAIL: $*"; }
# json FILE KEY: the first scalar value of KEY in runbox's (indented) --json output.
json() { sed -n "s/^ *\"$2\": *\"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1" | head -n1; }
int() { echo "${1%%.*}"; }
# run NAME ARGS...: runbox run --json, result in $T/NAME.json, stderr in $T/NAME.err.
run() {
	n=$1
	shift
	"$RB" run --json "$@" >"$T/$n.json" 2>"$T/$n.err"
	echo $? >"$T/$n.rc"
}
rc() { cat "$T/$1.rc"; }
show() { echo "  $1: exit=$(rc "$1") $(tr -d '\n' <"$T/$1.err" | head -c 300)"; }
cgdirs() { find /sys/fs/cgroup/runbox -mindepth 1 -type d 2>/dev/null | wc -l; }

# --- the kernel's cgroup v2 ---
ctl=$(cat /sys/fs/cgroup/cgroup.controllers)
ok=1
for c in cpuset cpu io memory hugetlb pids; do
	echo " $ctl " | grep -q " $c " || ok=0
done
[ $ok = 1 ] && pass "cgroup v2 controllers: $ctl" || fail "cgroup v2 controllers: $ctl"

if ! [ -x "$RB" ]; then
	fail "runbox binary missing in the initramfs"
	echo "VMTEST: $P passed, $F failed"
	exit 0
fi
"$RB" --help >/dev/null 2>&1 && pass "runbox --help" || fail "runbox --help"
"$RB" check >"$T/check.out" 2>&1
echo "  runbox check: $(grep -i cgroup "$T/check.out" | head -n 3 | tr '\n' ' ')"

# --- a first run, and which manager served it ---
out=$("$RB" run --image minimal -- /bin/sh -c 'echo hi' 2>"$T/hello.err")
[ "$out" = hi ] && pass "runbox run --image minimal echo hi" || { fail "runbox run echo hi (got '$out')"; cat "$T/hello.err"; }
run mgr --image minimal --memory 64M --pids 32 --cpus 1 -- /bin/true
m=$(json "$T/mgr.json" cgroup)
mech=$(json "$T/mgr.json" mechanism)
[ "$(rc mgr)" = 0 ] && [ "$m" = v2 ] && echo "$mech" | grep -q "cgroup v2" && pass "cgroup manager v2 ($mech)" ||
	{ fail "cgroup manager v2 (got '$m', '$mech')"; show mgr; }

# --- memory: a hog is OOM-killed; control: a smaller appetite under a bigger limit is not ---
run oom --image minimal --memory 32M -- /bin/probe alloc 256
peak=$(json "$T/oom.json" memory_peak_bytes)
if [ "$(json "$T/oom.json" oom_killed)" = true ] && [ "$(json "$T/oom.json" oom_kills)" -ge 1 ] 2>/dev/null &&
	[ "${peak:-0}" -ge $((32 * 1048576 * 8 / 10)) ]; then
	pass "memory hog OOM-killed via memory.max (oom_killed true, peak $peak)"
else
	fail "memory hog OOM-killed (oom_killed=$(json "$T/oom.json" oom_killed) peak=$peak)"
	show oom
fi
run oomctl --image minimal --memory 128M -- /bin/probe alloc 16
[ "$(json "$T/oomctl.json" oom_killed)" = false ] && [ "$(rc oomctl)" = 0 ] &&
	pass "control: 16M under 128M is not killed" || { fail "control: 16M under 128M"; show oomctl; }

# --- an OOM kill takes one step's cgroup, not the run: a background hog left by step 1 is
# OOM-killed while step 2 runs in its own leaf, and step 2 finishes; control: a hog that fits ---
oomstep() { # NAME HOG_MB: a two-step manifest under 32M; result in $T/NAME.out
	cat >"$T/$1.json" <<EOF
{"tenant": "vm", "agent": "test", "image": "minimal", "limits": {"memory": "32M"},
 "steps": [{"name": "bg-hog", "script": "(sleep 0.5; /bin/probe alloc $2) >/dev/null 2>&1 &"},
           {"name": "after", "script": "sleep 2; echo step2-alive; cat /proc/self/cgroup"}]}
EOF
	watching_leaf "$1" "$RB" run --json "$T/$1.json"
}
# watching_leaf NAME CMD...: runs CMD (output in $T/NAME.out and .err, exit in .rc) while
# looking, from the host, for a process in a run's leaf step-2; "step-2" in $T/NAME.leaf when
# seen (inside, the step's cgroup namespace is rooted at its leaf: /proc/self/cgroup is "0::/").
watching_leaf() {
	local name=$1 w
	shift
	: >"$T/$name.leaf"
	(for i in $(seq 1 60); do
		if find /sys/fs/cgroup -path '*runbox/*/step-2/cgroup.procs' -exec cat {} + 2>/dev/null | grep -q .; then
			echo step-2 >"$T/$name.leaf"
			break
		fi
		sleep 0.1
	done) &
	w=$!
	"$@" >"$T/$name.out" 2>"$T/$name.err"
	echo $? >"$T/$name.rc"
	kill $w 2>/dev/null
	wait $w 2>/dev/null
}
# step_spared NAME WHAT: the manifest run NAME finished, its step 2 ran in leaf step-2 (its
# cgroup namespace rooted there), and an OOM kill was counted.
step_spared() {
	if [ "$(rc "$1")" = 0 ] && grep -q step2-alive "$T/$1.out" && grep -q '"oom_killed": true' "$T/$1.out" &&
		grep -q step-2 "$T/$1.leaf" && grep -q '0::/\\n' "$T/$1.out"; then
		pass "$2: an OOM kill of step 1's leftover leaves step 2 (in its own leaf step-2) running"
	else
		fail "$2: an OOM kill of one step's leaf spares the run"
		grep -E 'step2|oom_killed|exit|cgroup|error' "$T/$1.out" | head -n 12
		show "$1"
	fi
}
oomstep oomstep 256
step_spared oomstep root
oomstep oomstepctl 4
if [ "$(rc oomstepctl)" = 0 ] && grep -q step2-alive "$T/oomstepctl.out" &&
	! grep -q '"oom_killed": true' "$T/oomstepctl.out"; then
	pass "control: a 4M leftover is not OOM-killed"
else
	fail "control: a 4M leftover is not OOM-killed"
	show oomstepctl
fi

# --- pids: a fork bomb stops with EAGAIN (11); control: under the limit every fork works ---
run bomb --image minimal --pids 16 -- /bin/probe forkbomb 500
pk=$(json "$T/bomb.json" pids_peak)
[ "$(rc bomb)" = 11 ] && [ "${pk:-99}" -le 16 ] && pass "fork bomb stopped at pids.max (EAGAIN, pids peak $pk)" ||
	{ fail "fork bomb stopped at pids.max (peak $pk)"; show bomb; }
run bombctl --image minimal --pids 64 -- /bin/probe forkbomb 20
[ "$(rc bombctl)" = 0 ] && pass "control: 20 forks under pids.max 64" || { fail "control: 20 forks"; show bombctl; }

# --- cpu: two busy loops under --cpus 0.5 use at most 0.6 cpu-s per wall-s over >= 2 s ---
cpu_ratio() { # NAME: "ok" when cpu_usec <= 0.6 * wall_ms * 1000, "over", or "nodata"
	u=$(int "$(json "$T/$1.json" cpu_usec)")
	w=$(int "$(json "$T/$1.json" wall_ms)")
	echo "  $1: cpu_usec=$u wall_ms=$w" >&2
	if [ "$(rc "$1")" != 0 ] || [ -z "$u" ] || [ -z "$w" ] || [ "$w" -lt 1000 ]; then
		echo nodata
	elif [ "$u" -le $((w * 600)) ]; then
		echo ok
	else
		echo over
	fi
}
run cpu --image minimal --cpus 0.5 -- /bin/sh -c '/bin/probe busy 2000 & /bin/probe busy 2000; wait'
[ "$(cpu_ratio cpu)" = ok ] && pass "cpu.max: <= 0.6 cpu-s per wall-s under --cpus 0.5" || { fail "cpu.max bound"; show cpu; }
run cpuctl --image minimal --cpus 2 -- /bin/sh -c '/bin/probe busy 2000 & /bin/probe busy 2000; wait'
[ "$(cpu_ratio cpuctl)" = over ] && pass "control: two busy loops under --cpus 2 exceed 0.6 cpu-s per wall-s" ||
	{ fail "control: two busy loops under --cpus 2 exceed 0.6"; show cpuctl; }

# --- the gateway runs in a leaf of the run's cgroup, cloned into it (CLONE_INTO_CGROUP);
# control: the runner that started it is not there. The leaf goes with the run. ---
"$RB" run --json --image minimal --net gateway --memory 64M --cpus 1 -- /bin/sh -c \
	'busybox wget -q -O /dev/null "$RUNBOX_API_URL/v1/health"; echo got $?; sleep 3' >"$T/gw.json" 2>"$T/gw.err" &
gwrb=$!
gwpid=""
for i in $(seq 1 100); do
	gwpid=$(pidof runbox-gateway | cut -d " " -f 1)
	[ -n "$gwpid" ] && break
	sleep 0.1
done
gwcg=$(grep '^0::' "/proc/$gwpid/cgroup" 2>/dev/null)
rbcg=$(grep '^0::' "/proc/$gwrb/cgroup" 2>/dev/null)
wait $gwrb
echo "  gateway: $gwcg; runner: $rbcg"
case "$gwcg" in
"0::/runbox/"*/gateway) pass "v2: the gateway runs in the run's leaf ($gwcg)" ;;
*) fail "v2: the gateway runs in the run's leaf (pid '$gwpid': '$gwcg')"; show gw ;;
esac
case "$rbcg" in
"0::/runbox/"*) fail "control: the runner is outside the run's cgroup ($rbcg)" ;;
"0::"*) pass "control: the runner is outside the run's cgroup ($rbcg)" ;;
*) fail "control: the runner's cgroup could not be read" ;;
esac
grep -q 'CLONE_INTO_CGROUP' "$T/gw.json" && grep -q '"got 0' "$T/gw.json" &&
	pass "v2: the result says CLONE_INTO_CGROUP placed it, and the step's call was answered" ||
	{ fail "v2: the result names CLONE_INTO_CGROUP"; grep -A4 '"cgroup": {' "$T/gw.json"; show gw; }
[ "$(cgdirs)" = 0 ] && pass "v2: no cgroup of the gateway's run is left" ||
	{ fail "v2: the gateway's run left cgroups"; find /sys/fs/cgroup/runbox -mindepth 1 -type d; }

# --- kill: a double-forked daemon dies with the run; control: outside runbox it lives on ---
alive() { ps -o pid,args 2>/dev/null | grep -v grep | grep -q "$1"; }
run daemon --image minimal -- /bin/probe daemonize /tmp/d.pid vmtest-daemon-marker
if [ "$(rc daemon)" = 0 ] && ! alive vmtest-daemon-marker; then
	pass "double-forked daemon dead after the run"
else
	fail "double-forked daemon dead after the run"
	show daemon
fi
/opt/runbox/build/images/minimal/rootfs/bin/probe daemonize "$T/ctl.pid" vmtest-control-marker
if alive vmtest-control-marker; then
	pass "control: a daemon started outside runbox survives"
	kill -9 "$(cat "$T/ctl.pid")" 2>/dev/null
else
	fail "control: a daemon started outside runbox survives"
fi
run tmo --image minimal --timeout 1s -- /bin/sh -c '/bin/probe daemonize /tmp/x vmtest-timeout-marker; sleep 100'
[ "$(rc tmo)" = 124 ] && ! alive vmtest-timeout-marker && pass "timeout: exit 124, the whole cgroup killed" ||
	{ fail "timeout kills the cgroup"; show tmo; }

# --- gc after the runner was killed: a run with step leaves (init, step-1) is removed whole;
# control: its cgroups are still there before gc ---
"$RB" run --image minimal --memory 64M -- /bin/probe sleep-forever vmtest-gc-marker >/dev/null 2>&1 &
rbpid=$!
for i in $(seq 1 50); do # (the marker is in runbox's own argv too: wait for the cgroups instead)
	[ "$(cgdirs)" -ge 3 ] && break
	sleep 0.1
done
sleep 0.3
kill -9 $rbpid
wait $rbpid 2>/dev/null
before=$(cgdirs)
"$RB" gc >"$T/gc.out" 2>&1
after=$(cgdirs)
if [ "$before" -ge 3 ] && [ "$after" = 0 ] && ! alive vmtest-gc-marker; then
	pass "gc after kill -9 removes the run's cgroup with its leaves ($before dirs before, none after)"
else
	fail "gc after kill -9 removes the run's cgroup with its leaves ($before before, $after after)"
	cat "$T/gc.out"
	find /sys/fs/cgroup/runbox -mindepth 1 -type d
fi

# --- nothing left: no run cgroup remains; control: one exists while a run is live ---
"$RB" run --image minimal -- /bin/sh -c 'sleep 3' >/dev/null 2>&1 &
bg=$!
seen=0
for i in $(seq 1 50); do
	[ "$(cgdirs)" -ge 1 ] && { seen=1; break; }
	sleep 0.1
done
wait $bg
[ $seen = 1 ] && pass "control: a live run has its cgroup under /sys/fs/cgroup/runbox" || fail "control: live run cgroup seen"
i=0
while [ $i -lt 30 ]; do
	"$RB" run --image minimal --memory 32M --pids 16 -- /bin/true >/dev/null 2>&1 || break
	i=$((i + 1))
done
left=$(cgdirs)
[ $i = 30 ] && [ "$left" = 0 ] && pass "no runbox cgroup left after 30 more runs" ||
	{ fail "leftover cgroups: $left after $i runs"; find /sys/fs/cgroup/runbox -mindepth 1 -type d; }

# --- rootless (uid 65534) with a delegated cgroup, as systemd's Delegate=yes gives a user:
# v2 limits hold and an OOM kill takes one step; control: outside the delegation, no limits ---
RL=/sys/fs/cgroup/rl
RLT=/tmp/rl
mkdir -p "$RL" "$RLT"
echo "+memory +pids +cpu" >"$RL/cgroup.subtree_control"
chown -R 65534:65534 "$RLT"
chmod -R a+rX "$T"
scopes=0
# nobody ARGS...: runbox ARGS as 65534; with DELEGATED=1 from a fresh cgroup of its own below
# $RL, owned by 65534 (what `systemd-run --user --scope` gives: a delegated scope).
nobody() {
	set -- env RUNBOX_STATE_DIR=$RLT/s XDG_RUNTIME_DIR=$RLT HOME=$RLT $PROBE_HOST exec-as 65534 65534 "$RB" "$@"
	if [ "${DELEGATED:-0}" = 1 ]; then
		scopes=$((scopes + 1))
		sc=$RL/scope-$scopes
		mkdir "$sc" && chown -R 65534:65534 "$sc"
		sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$sc" "$@"
	else
		"$@"
	fi
}
PROBE_HOST=/opt/runbox/build/images/minimal/rootfs/bin/probe
DELEGATED=1 nobody run --json --image minimal --memory 32M -- /bin/probe alloc 256 >"$T/rloom.json" 2>"$T/rloom.err"
echo $? >"$T/rloom.rc"
if [ "$(json "$T/rloom.json" oom_killed)" = true ] && [ "$(json "$T/rloom.json" cgroup)" = v2 ]; then
	pass "rootless, delegated: memory hog OOM-killed under cgroup v2"
else
	fail "rootless, delegated: memory hog OOM-killed (cgroup=$(json "$T/rloom.json" cgroup) oom=$(json "$T/rloom.json" oom_killed))"
	show rloom
fi
cp "$T/oomstep.json" "$T/rlstep.json" 2>/dev/null
DELEGATED=1 watching_leaf rlstep nobody run --json "$T/rlstep.json"
step_spared rlstep "rootless, delegated"
DELEGATED=0 nobody run --json --image minimal --memory 32M -- /bin/true >"$T/rlctl.json" 2>"$T/rlctl.err"
echo $? >"$T/rlctl.rc"
if [ "$(rc rlctl)" = 0 ] && [ "$(json "$T/rlctl.json" cgroup)" = none ]; then
	pass "control: rootless outside the delegation gets the none manager"
else
	fail "control: rootless outside the delegation (cgroup=$(json "$T/rlctl.json" cgroup))"
	show rlctl
fi
find "$RL" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
rmdir "$RL" 2>/dev/null

# --- core isolation, each against the same probe outside the sandbox ---
PROBE=/opt/runbox/build/images/minimal/rootfs/bin/probe
POLICY=default
inside() { "$RB" run --image minimal --policy "$POLICY" -- /bin/probe "$@" >/dev/null 2>&1; echo $?; }
outside() { "$PROBE" "$@" >/dev/null 2>&1; echo $?; }
# "denied" is an errno (1..124); 125..127 would be runbox failing, not the probe.
want() { [ "$2" = "$1" ] || { [ "$1" = nonzero ] && [ "$2" -ge 1 ] && [ "$2" -le 124 ]; }; }
iso() { # NAME WANT_INSIDE WANT_OUTSIDE PROBE-ARGS... (a WANT is an exit code or "nonzero")
	name=$1 wi=$2 wo=$3
	shift 3
	i=$(inside "$@")
	o=$(outside "$@")
	want "$wi" "$i" && want "$wo" "$o" && pass "$name (inside $i, outside $o)" ||
		fail "$name (inside $i want $wi, outside $o want $wo)"
}
iso "pid namespace: the step sees itself as a low pid" 0 1 pid 2
iso "no CAP_SYS_ADMIN (default policy)" 1 0 caps-has CAP_SYS_ADMIN
POLICY=strict
iso "capabilities all zero (strict policy)" 0 1 caps-zero
POLICY=default
iso "no_new_privs set" 0 1 nnp
iso "seccomp filter on" 0 1 seccomp-mode
iso "mount denied" nonzero 0 mount-tmpfs /tmp
iso "unshare(CLONE_NEWUSER) denied" nonzero 0 unshare-user
for ns in user mnt pid net ipc uts cgroup; do
	in=$("$RB" run --image minimal -- /bin/sh -c "readlink /proc/self/ns/$ns" 2>/dev/null)
	out=$(readlink /proc/self/ns/$ns)
	[ -n "$in" ] && [ "$in" != "$out" ] && [ "$out" = "$(readlink /proc/1/ns/$ns)" ] &&
		pass "own $ns namespace" || fail "own $ns namespace ($in vs $out)"
done
n_in=$("$RB" run --image minimal -- /bin/probe ls-pids 2>/dev/null | wc -l)
n_out=$("$PROBE" ls-pids | wc -l)
[ "$n_in" -ge 1 ] && [ "$n_in" -le 3 ] && [ "$n_out" -gt 10 ] && pass "only the sandbox's processes are visible ($n_in vs $n_out)" ||
	fail "process visibility ($n_in inside, $n_out outside)"
ifs=$("$RB" run --image minimal -- /bin/sh -c 'cat /proc/net/dev' 2>/dev/null | sed -n 's/^ *\([a-z0-9]*\):.*/\1/p' | tr '\n' ' ')
[ "$ifs" = "lo " ] && pass "network: only lo" || fail "network: only lo (got '$ifs')"
h=$("$RB" run --image minimal -- /bin/sh -c 'hostname' 2>/dev/null)
[ -n "$h" ] && [ "$h" != "$(hostname)" ] && pass "own hostname ($h)" || fail "own hostname ($h)"

# --- a step's process between its change of ids and its seccomp filter shares init's memory
# until execve. With fs.suid_dumpable at 1 (this VM's own kernel), a process of the same uid
# left by an earlier step races to open /proc/PID/mem of each new step's process; it must never
# get one before the filter. Controls: the watcher saw processes in that window, and opened the
# filtered steps' memory (same uid, dumpable). ---
old_dumpable=$(cat /proc/sys/fs/suid_dumpable)
old_scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || true)
echo 1 >/proc/sys/fs/suid_dumpable
[ -n "$old_scope" ] && echo 0 >/proc/sys/kernel/yama/ptrace_scope
steps='{"name": "watcher", "script": "/bin/probe mem-watch 60000 /workspace/watch >/dev/null 2>&1 &"}'
for i in $(seq 1 40); do
	steps="$steps, {\"name\": \"s$i\", \"script\": \"true\"}"
done
cat >"$T/memwatch.json" <<EOF
{"tenant": "vm", "agent": "test", "image": "minimal", "policy": "strict",
 "steps": [$steps, {"name": "report", "script": "cat /workspace/watch"}]}
EOF
"$RB" run --json "$T/memwatch.json" >"$T/memwatch.out" 2>"$T/memwatch.err"
echo $? >"$T/memwatch.rc"
echo "$old_dumpable" >/proc/sys/fs/suid_dumpable
[ -n "$old_scope" ] && echo "$old_scope" >/proc/sys/kernel/yama/ptrace_scope
counts=$(sed -n 's/.*window=\([0-9]*\) breach=\([0-9]*\) opened=\([0-9]*\).*/\1 \2 \3/p' "$T/memwatch.out" | tail -n 1)
read -r win breach opened <<EOF
$counts
EOF
if [ "$(rc memwatch)" = 0 ] && [ "${win:-0}" -ge 1 ] && [ "${breach:-1}" = 0 ] && [ "${opened:-0}" -ge 1 ]; then
	pass "suid_dumpable=1: no step's process opened before its filter (window $win, breach $breach, control opens $opened)"
else
	fail "suid_dumpable=1: a step's memory before its filter (window ${win:-?}, breach ${breach:-?}, control opens ${opened:-?})"
	show memwatch
fi

echo "VMTEST: $P passed, $F failed"
