#!/usr/bin/env bash
# Isolation: namespaces, identity, capabilities, no_new_privs, seccomp, no nested namespaces,
# no mounts, no leaked fds or host cwd, masked /proc, ttys. Every check runs the probe inside
# the sandbox and, as its negative control, outside it (as root on the host).
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init isolation
STRICT_SKIPS=1 # in CI, a skip here fails unless it is a host_limit (lib.sh)

# --- a step runs at all ---
sb -- /bin/sh -c 'echo hi'
if [ "$RC" = 0 ] && [ "$OUT" = hi ]; then ok "minimal image runs /bin/sh"; else
	not_ok "minimal image runs /bin/sh" "exit $RC, stdout '$(first_line "$OUT")', stderr '$(first_line "$ERR")'"
	note "nothing else can work; stopping"
	exit 0
fi

# --- namespaces: every /proc/self/ns link differs from the host's (minijail's check) ---
host_ns=$("$PROBE" nsinfo)
again_ns=$("$PROBE" nsinfo)
sb -- /bin/probe nsinfo
if [ "$host_ns" != "$again_ns" ]; then
	skip "namespaces differ from the host's" "control: two host runs disagree"
elif [ "$RC" != 0 ]; then
	not_ok "namespaces differ from the host's" "probe nsinfo exit $RC: $(first_line "$ERR")"
else
	for ns in user mnt pid net ipc uts cgroup; do
		h=$(grep "^$ns:" <<<"$host_ns")
		i=$(grep "^$ns:" <<<"$OUT")
		if [ -z "$i" ]; then not_ok "$ns namespace is new" "no $ns line inside"
		elif [ "$i" = "$h" ]; then not_ok "$ns namespace is new" "inside $i = host $h"
		else ok "$ns namespace is new"; fi
	done
fi

# net: only lo. Control: the host has more than lo.
host_ifs=$(awk 'NR > 2 { sub(":", "", $1); print $1 }' /proc/net/dev | sort | tr '\n' ' ')
sb -- /bin/sh -c "awk 'NR > 2 { sub(\":\", \"\", \$1); print \$1 }' /proc/net/dev"
ifs=$(tr '\n' ' ' <<<"$OUT")
if [ "$RC" != 0 ]; then not_ok "netns has only lo" "exit $RC: $(first_line "$ERR")"
elif [ "$ifs" != "lo " ]; then not_ok "netns has only lo" "interfaces inside: $ifs"
elif [ "$host_ifs" = "lo " ]; then host_limit "netns has only lo" "the host has only lo too (/proc/net/dev)"
else ok "netns has only lo"; fi

# lo is up: a server and client on 127.0.0.1 work. Control: in a fresh netns (lo down) the
# same probe fails, so the check can see a down lo.
pair_lo() {
	control nz unshare -n "$PROBE" listen-connect
	local c=$?
	sb -- /bin/probe listen-connect
	if [ "$RC" != 0 ]; then not_ok "lo is up (loopback server works)" "exit $RC: $(first_line "$ERR")"
	elif [ $c != 0 ]; then skip "lo is up (loopback server works)" "control: works with lo down too"
	else ok "lo is up (loopback server works)"; fi
}
pair_lo

# uts: the sandbox has its own hostname; setting it inside never changes the host's.
host_name=$(cat /proc/sys/kernel/hostname)
sb -- /bin/sh -c 'cat /proc/sys/kernel/hostname; /bin/probe hostname rbx-probe-name; cat /proc/sys/kernel/hostname'
if [ "$(cat /proc/sys/kernel/hostname)" != "$host_name" ]; then
	not_ok "hostname is the sandbox's own" "the host's hostname changed to $(cat /proc/sys/kernel/hostname)"
elif [ "$(head -n 1 <<<"$OUT")" = "$host_name" ] && [ "$host_name" != runbox ]; then
	not_ok "hostname is the sandbox's own" "inside sees the host's hostname $host_name"
else ok "hostname is the sandbox's own"; fi

# pid: only the sandbox's processes are visible; the step is not PID 1 (runbox's init is).
host_pids=$("$PROBE" ls-pids | wc -l)
sb -- /bin/probe ls-pids
n=$(wc -l <<<"$OUT")
if [ "$RC" != 0 ]; then not_ok "only sandbox pids visible" "exit $RC: $(first_line "$ERR")"
elif [ "$n" -gt 3 ]; then not_ok "only sandbox pids visible" "$n pids inside: $(tr '\n' ' ' <<<"$OUT")"
elif [ "$host_pids" -le 3 ]; then host_limit "only sandbox pids visible" "the host itself shows only $host_pids pids"
else ok "only sandbox pids visible"; fi
CTRL_CMD="unshare -pf --mount-proc $PROBE pid 1" pair "the step is not PID 1" 1 -- pid 1

# --- identity ---
# Controls run as uid 65534, so they show that the probe sees a uid other than 0.
CTRL_CMD="$NOBODY_CTL $PROBE uid 0" CTRL_WANT=1 pair "uid 0 inside (default policy)" 0 -- uid 0
CTRL_WANT=1 pair "uid 1000 inside (strict policy)" 0 --policy strict -- uid 1000
CTRL_WANT=1 pair "gid 1000 inside (strict policy)" 0 --policy strict -- gid 1000
pair "setuid 0 fails under strict" "$EPERM|22" --policy strict -- setuid 0
pair "setgid 0 fails under strict" "$EPERM|22" --policy strict -- setgid 0

# The sandbox's root is an unprivileged host uid: read the host's view of a sleeping step.
# Control: the same method on a host process run by root reads uid 0.
# maps_host_root FILE: some line "inside outside count" of an id map covers host id 0.
maps_host_root() { awk '$2 == 0 { f = 1 } END { exit !f }' "$1"; }
host_uid_of() { awk '/^Uid:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
check_host_uid() {
	local name="sandbox root is not host root" m pid c_pid bg
	m=$(new_marker)
	"$PROBE" sleep-forever "$m-ctl" &
	c_pid=$!
	wait_for has_marker "$m-ctl"
	local cu
	cu=$(host_uid_of "$c_pid")
	kill "$c_pid"
	wait "$c_pid" 2>/dev/null
	rbx_cmd run --image minimal --timeout 20s -- /bin/probe sleep-forever "$m"
	"${RBX_CMD[@]}" >/dev/null 2>"$T/bg.err" </dev/null &
	bg=$!
	if ! wait_for has_marker --prefix "/bin/probe sleep-forever $m"; then
		not_ok "$name" "the step never showed up on the host ($(first_line "$(cat "$T/bg.err")"))"
	else
		pid=$(pids_with --prefix "/bin/probe sleep-forever $m" | head -n 1)
		local u
		u=$(host_uid_of "$pid")
		if [ -z "$u" ]; then not_ok "$name" "cannot read /proc/$pid/status"
		elif [ "$u" = 0 ]; then not_ok "$name" "the step runs as host uid 0"
		elif [ "$cu" != 0 ]; then skip "$name" "control: a root process reads as uid $cu"
		else ok "$name (host uid $u)"; fi
		# No range of the sandbox's uid and gid maps reaches host id 0. Control: the
		# host's own map does, and the same check sees it.
		for f in uid_map gid_map; do
			if ! maps_host_root /proc/self/$f; then
				skip "$f never maps host id 0" "control: the host's $f does not cover 0"
			elif [ ! -r "/proc/$pid/$f" ]; then not_ok "$f never maps host id 0" "cannot read /proc/$pid/$f"
			elif maps_host_root "/proc/$pid/$f"; then
				not_ok "$f never maps host id 0" "$(tr -s ' \n' ' ' <"/proc/$pid/$f")"
			else ok "$f never maps host id 0 ($(tr -s ' \n' ' ' <"/proc/$pid/$f"))"; fi
		done
	fi
	kill -TERM "$bg" 2>/dev/null
	wait "$bg" 2>/dev/null
	wait_for no_marker "$m"
}
check_host_uid

# --- concurrent root-mode runs get disjoint host id slices ---
# Per-user kernel limits (inflight SCM_RIGHTS fds, pipe buffer pages) count by host uid, so two
# runs at once must never map to the same host ids. Control: two runs one after the other get
# the same slice back, so the comparison sees real maps, and a run's end frees its slice.
# Rootless runs map to the caller's own ids (docs/threat-model.md).
map_start() { awk '$1 == 0 { print $2 }' <<<"$1"; } # MAP: the host id of the sandbox's 0
check_slices() {
	local name="concurrent root runs map to disjoint host ids" m pid bg a b c d
	m=$(new_marker)
	rbx_cmd run --image minimal --timeout 30s -- /bin/probe sleep-forever "$m"
	"${RBX_CMD[@]}" >/dev/null 2>"$T/slice.err" </dev/null &
	bg=$!
	if ! wait_for has_marker --prefix "/bin/probe sleep-forever $m"; then
		not_ok "$name" "the first run's step never showed up ($(first_line "$(cat "$T/slice.err")"))"
		kill -TERM "$bg" 2>/dev/null
		wait "$bg" 2>/dev/null
		return
	fi
	pid=$(pids_with --prefix "/bin/probe sleep-forever $m" | head -n 1)
	a=$(map_start "$(cat "/proc/$pid/uid_map" 2>/dev/null)")
	sb --json -- /bin/true
	b=$(map_start "$(json "$T/out" sandbox.uid_map)")
	kill -TERM "$bg" 2>/dev/null
	wait "$bg" 2>/dev/null
	wait_for no_marker "$m"
	sb --json -- /bin/true
	c=$(map_start "$(json "$T/out" sandbox.uid_map)")
	sb --json -- /bin/true
	d=$(map_start "$(json "$T/out" sandbox.uid_map)")
	if [ -z "$a" ] || [ -z "$b" ] || [ -z "$c" ] || [ -z "$d" ]; then
		not_ok "$name" "a map is missing: running '$a', beside it '$b', after '$c' '$d'"
	elif [ "$c" != "$d" ]; then not_ok "$name" "control: two runs in a row map to $c and $d"
	elif [ $((a > b ? a - b : b - a)) -lt 65536 ]; then
		not_ok "$name" "runs at once map 0 to host $a and $b: their 65536 ids overlap"
	else ok "$name (at once: $a, $b; in a row: $c, $d; $(json "$T/out" sandbox.id_source))"; fi
}
[ "$MODE" = root ] && check_slices

# --- capabilities, no_new_privs, seccomp ---
CTRL_WANT=1 pair "no capabilities under strict" 0 --policy strict -- caps-zero
pair "no CAP_SYS_ADMIN under default" 1 -- caps-has sys_admin
CTRL_CMD="$NOBODY_CTL $PROBE caps-has chown" CTRL_WANT=1 pair "CAP_CHOWN kept under default" 0 -- caps-has chown
sb -- /bin/sh -c 'grep -E "^Cap(Eff|Bnd|Inh|Amb)" /proc/self/status'
docker_caps="CapInh:0000000000000000 CapEff:00000000a80425fb CapBnd:00000000a80425fb CapAmb:0000000000000000"
got=$(tr -d ' \t' <<<"$OUT" | tr '\n' ' ' | sed 's/ $//')
if [ "$RC" != 0 ]; then not_ok "default policy has exactly Docker's capability set" "exit $RC"
elif [ "$got" = "$docker_caps" ]; then ok "default policy has exactly Docker's capability set"
else not_ok "default policy has exactly Docker's capability set" "got $got"; fi
# A non-root uid granted a capability keeps it across its execve through the ambient set (and
# nothing more); the control is strict itself, the same uid with none.
policy_variant strict "$T/scratch/ambient.json" ambient 'p["identity"]["capabilities"] = ["CAP_NET_BIND_SERVICE"]'
amb() { tr -d ' \t' <<<"$OUT" | tr '\n' ' ' | sed 's/ $//'; }
sb --policy "$T/scratch/ambient.json" -- /bin/sh -c 'id -u; grep -E "^Cap(Eff|Amb)" /proc/self/status'
got=$(amb)
sb --policy strict -- /bin/sh -c 'id -u; grep -E "^Cap(Eff|Amb)" /proc/self/status'
ctl=$(amb)
if [ "$ctl" != "1000 CapEff:0000000000000000 CapAmb:0000000000000000" ]; then
	not_ok "uid 1000 granted CAP_NET_BIND_SERVICE has it, ambient" "control (strict): $ctl"
elif [ "$got" = "1000 CapEff:0000000000000400 CapAmb:0000000000000400" ]; then
	ok "uid 1000 granted CAP_NET_BIND_SERVICE has it, ambient"
else not_ok "uid 1000 granted CAP_NET_BIND_SERVICE has it, ambient" "got $got"; fi
CTRL_WANT=1 pair "no_new_privs is set" 0 -- nnp
CTRL_WANT=1 pair "no_new_privs is set (strict)" 0 --policy strict -- nnp
CTRL_WANT=1 pair "seccomp filter is on" 0 -- seccomp-mode

# rlimits come from the policy, not from runbox's caller. Control: the caller's limits are
# set to other values, so inheriting them would show.
(
	ulimit -c 123456 && ulimit -n 4000 && ulimit -f 2000000 || exit 1
	sb -- /bin/sh -c 'grep -E "^Max (core file size|open files|file size|processes)" /proc/self/limits'
	printf '%s\n' "$RC" "$OUT" >"$T/limits.res"
) || note "could not set the caller's limits"
if [ -s "$T/limits.res" ]; then
	rc=$(head -n 1 "$T/limits.res")
	lim=$(tail -n +2 "$T/limits.res")
	core=$(awk '/^Max core/ { print $5 }' <<<"$lim")
	nofile=$(awk '/^Max open files/ { print $4 }' <<<"$lim")
	fsize=$(awk '/^Max file size/ { print $4 }' <<<"$lim")
	if [ "$rc" != 0 ]; then not_ok "rlimits from the policy" "exit $rc"
	elif [ "$core" = 0 ] && [ "$nofile" = 1024 ] && [ "$fsize" = 1073741824 ]; then ok "rlimits from the policy (core 0, nofile 1024, fsize 1G)"
	else not_ok "rlimits from the policy" "core=$core nofile=$nofile fsize=$fsize"; fi
else
	skip "rlimits from the policy" "control: the caller's limits could not be changed"
fi

# --- no nested namespaces ---
pair "unshare(CLONE_NEWUSER) denied" "$EPERM" -- unshare-user
pair "unshare(CLONE_NEWNET) denied" "$EPERM" -- unshare-net
pair "unshare(CLONE_NEWNS) denied" "$EPERM" -- unshare-mnt
pair "setns denied" "$EPERM" -- setns /proc/self/ns/net
pair "clone(CLONE_NEWNS) denied" "$EPERM" -- clone-newns
pair "clone3 answers ENOSYS" "$ENOSYS" -- clone3
allowed "fork still works" -- fork

# --- no mounts (controls run in a private mount namespace on a scratch dir) ---
mnt=$T/scratch/m
src=$T/scratch/src
mkdir -p "$mnt" "$src"
CTRL_CMD="unshare -m $PROBE mount-tmpfs $mnt" pair "mount tmpfs denied" "$EPERM" -- mount-tmpfs /tmp
CTRL_CMD="unshare -m $PROBE mount-proc $mnt" pair "mount proc denied" "$EPERM" -- mount-proc /tmp
# CVE-2022-0492. The control mounts a named v1 hierarchy (this host may lack rdma).
CTRL_CMD="unshare -m $PROBE mount-cgroup1 $mnt none,name=rbxprobe" \
	pair "mount cgroup v1 (-o rdma) denied" "$EPERM" -- mount-cgroup1 /tmp
pair "fsopen denied" "$EPERM" -- fsopen tmpfs
pair "fsopen(cgroup) denied" "$EPERM" -- fsopen cgroup
pair "open_tree denied" "$EPERM" -- open-tree /tmp
CTRL_WANT=$EBADF pair "move_mount denied" "$EPERM" -- move-mount
CTRL_WANT=$ENOENT pair "pivot_root denied" "$EPERM" -- pivot-root

# --- dangerous kernel interfaces (ANCHORS 6.9) ---
pair "keyctl denied" "$EPERM" -- keyctl
pair "bpf denied" "$EPERM" -- bpf
pair "perf_event_open denied" "$EPERM" -- perf-event-open
pair "userfaultfd denied" "$EPERM" -- userfaultfd
pair "io_uring_setup denied" "$EPERM|$ENOSYS" -- io-uring-setup
pair "ptrace attach denied" "$EPERM" -- ptrace-attach
pair "process_vm_readv denied" "$EPERM" -- process-vm-readv
pair "kcmp denied" "$EPERM" -- kcmp
pair "pidfd_getfd denied" "$EPERM" -- pidfd-getfd
pair "name_to_handle_at denied" "$EPERM" -- name-to-handle-at /tmp
pair "open_by_handle_at denied (shocker)" "$EPERM" -- open-by-handle-at
# The filter answers EPERM, before the kernel looks at the family: so inside it is EPERM on
# every host, and the control (root, no filter) either opens the socket or gets the kernel's
# own answer for a family it was built without (EAFNOSUPPORT; EPROTONOSUPPORT for netlink).
CTRL_WANT="0|$EAFNOSUPPORT" pair "AF_PACKET socket denied" "$EPERM" -- socket packet
CTRL_WANT="0|$EAFNOSUPPORT" pair "AF_ALG socket denied" "$EPERM" -- socket alg
CTRL_WANT="0|$EAFNOSUPPORT" pair "AF_VSOCK socket denied" "$EPERM" -- socket vsock
CTRL_WANT="0|$EAFNOSUPPORT|93" pair "NETLINK_AUDIT socket denied" "$EPERM" -- socket netlink-audit
allowed "NETLINK_ROUTE socket allowed" -- socket netlink-route
allowed "AF_INET socket allowed" -- socket inet
allowed "AF_UNIX socket allowed" -- socket unix
# The socket type, for the allowed IP families: the filter answers ESOCKTNOSUPPORT, which the
# kernel never gives these calls, so a pass cannot come from the netns refusing them (EPERM).
# Controls: as root on the host every one of these calls succeeds.
ESOCKTNOSUPPORT=94
pair "socket(AF_INET, SOCK_PACKET) refused by the filter" "$ESOCKTNOSUPPORT" -- socket inet-packet
pair "socket(AF_INET, SOCK_PACKET) refused by the filter (strict)" "$ESOCKTNOSUPPORT" --policy strict -- socket inet-packet
# SOCK_RAW passes only where the policy grants CAP_NET_RAW: strict grants nothing; default
# grants Docker's set, which has it, so there the call meets the kernel, which refuses it
# because the netns belongs to the runner's user namespace.
pair "socket(AF_INET, SOCK_RAW) refused by the filter without CAP_NET_RAW" "$ESOCKTNOSUPPORT" --policy strict -- socket raw
pair "socket(AF_INET6, SOCK_RAW) refused by the filter without CAP_NET_RAW" "$ESOCKTNOSUPPORT" --policy strict -- socket raw6
pair "socket(AF_INET, SOCK_RAW) with CAP_NET_RAW reaches the kernel (netns refuses)" "$EPERM" -- socket raw
pair "personality(ADDR_NO_RANDOMIZE) denied" "$EPERM" -- personality 0x0040000
allowed "personality(0) allowed" -- personality 0
# Killed by SIGSYS (159): the filter kills any arch but x86_64, and x32 numbers (bit 30), on
# every host, since seccomp runs before the kernel's own dispatch. The control gets a pid
# (0), or ENOSYS from a kernel built without x32. A kernel with no int 0x80 gate at all
# faults it (SIGSEGV, 139) outside and inside alike: no i386 call can be made there, and the
# filter's i386 verdict is held by test_seccomp, which evaluates the BPF itself.
kconfig() { { zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null; } |
	grep -E "^(# )?$1[= ]" | head -n 1; }
ia32=$(kconfig CONFIG_IA32_EMULATION)
CTRL_WANT="0|$ENOSYS" CTRL_ABSENT=139 \
	CTRL_ABSENT_WHY="int 0x80 is no syscall gate on this kernel ($(uname -r)${ia32:+, $ia32}): it faults (SIGSEGV)" \
	pair "i386 syscall (int 0x80) denied" 159 -- int80-getpid
CTRL_WANT="0|$ENOSYS" pair "x32 syscall denied" 159 -- x32-getpid

# --- ttys (ANCHORS 6.8) ---
pair "TIOCSTI denied" "$EPERM" -- ioctl-tiocsti
pair "TIOCSTI with high bits denied (CVE-2019-10063)" "$EPERM" -- ioctl-tiocsti high
CTRL_WANT="$ENOTTY|22" pair "TIOCLINUX denied" "$EPERM" -- ioctl-tioclinux
allowed "TIOCGWINSZ allowed" -- ioctl-tiocgwinsz
# No host tty: the step has no controlling terminal even when runbox has one.
if command -v script >/dev/null; then
	script -qec "$PROBE open /dev/tty rw" /dev/null >"$T/ctrl.out" 2>&1
	c=$?
	rbx_cmd run --image minimal -- /bin/probe open /dev/tty rw
	script -qec "$(printf '%q ' "${RBX_CMD[@]}")" /dev/null >"$T/out" 2>&1
	RC=$?
	if [ "$RC" = 0 ]; then not_ok "no controlling tty inside" "/dev/tty opens inside"
	elif [ "$RC" = 125 ]; then not_ok "no controlling tty inside" "runbox failed: $(first_line "$(cat "$T/out")")"
	elif [ $c != 0 ]; then skip "no controlling tty inside" "control: /dev/tty does not open under script(1) either"
	else ok "no controlling tty inside"; fi
else
	skip "no controlling tty inside" "script(1) missing"
fi

# --- fds and cwd (CVE-2024-21626) ---
run_fds() { sb -- /bin/probe "$@" 3<"$ROOT" 4<"$T" 5>"$T/scratch/leak" 7<"$PROBE"; }
control 1 "$PROBE" fds 3<"$ROOT"
c=$?
run_fds fds
if [ "$RC" != 0 ]; then not_ok "only fds 0-2 inside" "exit $RC: $OUT $(first_line "$ERR")"
elif [ $c != 0 ]; then skip "only fds 0-2 inside" "control: extra fd not seen outside"
else ok "only fds 0-2 inside"; fi
control 0 "$PROBE" chdir /proc/self/fd/3 3<"$ROOT"
c=$?
rbx run --image minimal -- /bin/sh -c 'i=3; while [ $i -le 64 ]; do
	/bin/probe chdir /proc/self/fd/$i 2>/dev/null && echo "cwd via fd $i"; i=$((i + 1)); done; true' \
	3<"$ROOT" 4<"$T" 5>"$T/scratch/leak" 7<"$PROBE" >"$T/out" 2>"$T/err" </dev/null
RC=$?
OUT=$(cat "$T/out")
if [ "$RC" != 0 ]; then not_ok "cwd /proc/self/fd/3..64 refused" "exit $RC: $(first_line "$(cat "$T/err")")"
elif [ -n "$OUT" ]; then not_ok "cwd /proc/self/fd/3..64 refused" "$(tr '\n' ' ' <<<"$OUT")"
elif [ $c != 0 ]; then skip "cwd /proc/self/fd/3..64 refused" "control: chdir /proc/self/fd/3 fails outside"
else ok "cwd /proc/self/fd/3..64 refused"; fi
# runbox started from a host directory: the step's cwd is not it.
(cd "$T/scratch" && sb -- /bin/probe cwd && echo "$RC $OUT" >"$T/cwd.res")
read -r rc cwd <"$T/cwd.res"
if [ "$rc" != 0 ]; then not_ok "cwd is inside the sandbox" "exit $rc"
else
	CTRL_CMD="$PROBE stat $T/scratch" CTRL_WANT=0 pair "cwd is inside the sandbox (host dir absent)" "$ENOENT" -- stat "$T/scratch"
	[ "$cwd" = "$T/scratch" ] && note "cwd inside has the host's path name $cwd (exists only if the image has it)"
fi

# --- /proc: masked paths read empty, read-only paths give EROFS (ANCHORS 6.6) ---
for p in /proc/kcore /proc/keys /proc/timer_list /proc/sched_debug /proc/latency_stats \
	/proc/timer_stats /proc/interrupts /proc/acpi /proc/asound /proc/scsi /sys/firmware; do
	control 1 "$PROBE" empty "$p"
	c=$?
	sb -- /bin/probe empty "$p"
	if [ "$RC" != 0 ] && [ "$RC" != "$ENOENT" ]; then
		not_ok "masked $p reads empty" "exit $RC: $(first_line "$OUT") $(first_line "$ERR")"
	elif [ $c = 0 ]; then ok "masked $p reads empty"
	elif [ "$CTRL" = "$ENOENT" ]; then host_limit "masked $p" "absent on the host (ENOENT): nothing to mask; inside: exit $RC"
	elif [ "$CTRL" = 0 ]; then host_limit "masked $p" "empty on the host too; inside: exit $RC"
	else skip "masked $p" "control: the probe exits $CTRL on the host ($(first_line "$(cat "$T/ctrl.out")"))"; fi
done
CTRL_CMD="unshare -u $PROBE write /proc/sys/kernel/hostname rbx-ctl" \
	pair "/proc/sys is read-only" "$EROFS" -- write /proc/sys/kernel/hostname x
CTRL_CMD="unshare -u $PROBE write /proc/sys/kernel/domainname rbx-ctl" \
	pair "/proc/sys is read-only (domainname)" "$EROFS" -- write /proc/sys/kernel/domainname x
sb -- /bin/probe write /proc/sysrq-trigger h
if [ "$RC" = 0 ]; then not_ok "/proc/sysrq-trigger not writable" "write worked"
else ok "/proc/sysrq-trigger not writable (exit $RC)"; fi
sb -- /bin/sh -c 'grep -E " /proc(/| )" /proc/self/mountinfo | head -n 1'
if grep -q 'nosuid' <<<"$OUT" && grep -q 'nodev' <<<"$OUT" && grep -q 'noexec' <<<"$OUT"; then
	ok "/proc is nosuid,nodev,noexec"
else not_ok "/proc is nosuid,nodev,noexec" "mountinfo: $(first_line "$OUT")"; fi

# --- host identifiers: kernel command line, boot id, the state directory's path ---
# /proc/cmdline and boot_id are the host's in every namespace: runbox binds per-run values
# over them. Control: an unmasked file of the same kind (/proc/version) reads the host's
# value inside, so an unmasked cmdline would match too.
host_cmdline=$(cat /proc/cmdline)
host_boot=$(cat /proc/sys/kernel/random/boot_id)
sb -- /bin/sh -c 'cat /proc/version; echo; cat /proc/cmdline; echo; cat /proc/sys/kernel/random/boot_id'
in_version=$(sed -n 1p <<<"$OUT") in_cmdline=$(sed -n 3p <<<"$OUT") boot1=$(sed -n 5p <<<"$OUT")
if [ "$RC" != 0 ]; then not_ok "/proc/cmdline is not the host's" "exit $RC: $(first_line "$ERR")"
elif [ -z "$host_cmdline" ] || [ "$in_version" != "$(cat /proc/version)" ]; then
	skip "/proc/cmdline is not the host's" "control: the host's is empty, or /proc/version differs inside"
elif [ "$in_cmdline" = "$host_cmdline" ]; then not_ok "/proc/cmdline is not the host's" "inside reads the host's"
elif [ "$in_cmdline" != runbox ]; then not_ok "/proc/cmdline is not the host's" "inside reads '$(first_line "$in_cmdline")', want runbox"
else ok "/proc/cmdline is not the host's (reads runbox)"; fi
sb -- /bin/cat /proc/sys/kernel/random/boot_id
boot2=$OUT
uuid_re='^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$'
if [ "$RC" != 0 ]; then not_ok "boot_id is the run's own" "exit $RC: $(first_line "$ERR")"
elif [ "$host_boot" != "$(cat /proc/sys/kernel/random/boot_id)" ]; then skip "boot_id is the run's own" "control: the host's boot_id changes between reads"
elif [ "$boot1" = "$host_boot" ] || [ "$boot2" = "$host_boot" ]; then not_ok "boot_id is the run's own" "inside reads the host's $host_boot"
elif [ "$boot1" = "$boot2" ]; then not_ok "boot_id is the run's own" "two runs read the same $boot1"
elif ! grep -Eq "$uuid_re" <<<"$boot1"; then not_ok "boot_id is the run's own" "not a UUID: $boot1"
else ok "boot_id is the run's own (two runs: $boot1, $boot2)"; fi
# The state and run directories ($T/state, $T/xdg) hold the run's overlay layers, but the
# overlay's options name them relative to the staging dir. Control: an input bound from $T
# shows its host path in the same mountinfo, so the grep can see a $T path there.
mkdir -p "$T/scratch/mi-input" && chmod a+rx "$T/scratch/mi-input"
sb --input "$T/scratch/mi-input:/workspace/in/mi" -- /bin/cat /proc/self/mountinfo
leak=$(grep -F -e "$T/state" -e "$T/xdg" <<<"$OUT" | head -n 1)
if [ "$RC" != 0 ]; then not_ok "mountinfo names no state or run dir path" "exit $RC: $(first_line "$ERR")"
elif ! grep -qF "$T/scratch/mi-input" <<<"$OUT"; then
	skip "mountinfo names no state or run dir path" "control: the input's host path is not in mountinfo either"
elif [ -n "$leak" ]; then not_ok "mountinfo names no state or run dir path" "$(cut -c 1-200 <<<"$leak")"
elif [ ! -d "$T/state/run" ] && [ ! -d "$T/xdg/runbox" ]; then
	not_ok "mountinfo names no state or run dir path" "control: no run directory under $T/state or $T/xdg"
else ok "mountinfo names no state or run dir path (overlay: $(grep -o 'lowerdir[^,]*,upperdir=[^,]*' <<<"$OUT"))"; fi

# --- runbox's own binary (CVE-2019-5736) ---
sum_before=$(sha256sum "$RUNBOX" | cut -d' ' -f1)
cp "$RUNBOX" "$T/scratch/runbox-copy"
control 0 "$PROBE" open "$T/scratch/runbox-copy" w
c=$?
sb -- /bin/sh -c '/bin/probe open /proc/1/exe w; a=$?; /bin/probe write /proc/1/exe x; b=$?
	/bin/probe open /proc/self/exe w; d=$?; echo $a $b $d'
sum_after=$(sha256sum "$RUNBOX" | cut -d' ' -f1)
if [ "$sum_before" != "$sum_after" ]; then not_ok "runbox binary not writable via /proc/<pid>/exe" "sha256 changed!"
elif [ "$RC" != 0 ]; then not_ok "runbox binary not writable via /proc/<pid>/exe" "exit $RC: $(first_line "$ERR")"
elif grep -qw 0 <<<"$OUT"; then not_ok "runbox binary not writable via /proc/<pid>/exe" "an open for write worked: $OUT"
elif [ $c != 0 ]; then skip "runbox binary not writable via /proc/<pid>/exe" "control: a copy is not writable on the host"
else ok "runbox binary not writable via /proc/<pid>/exe (sha256 unchanged)"; fi

# --- init's memory is the host's: out of reach even of a step granted CAP_SYS_PTRACE ---
# init is a copy of the runner, never re-exec'd, so its memory belongs to the host's user
# namespace, and it is non-dumpable. The capability, granted in the sandbox's user namespace,
# opens another uid's memory there (the control), never init's. Without it (default policy),
# neither opens.
policy_variant default "$T/scratch/ptrace.json" ptrace 'p["identity"]["capabilities"].append("CAP_SYS_PTRACE")'
# Where the sandbox maps one id only (rootless without subordinate ids), there is no other uid:
# the control is then a sibling of the same uid, which opens without the capability too.
memtry='if /bin/probe exec-as 1000 1000 /bin/true 2>/dev/null; then o=other; /bin/probe exec-as 1000 1000 /bin/sleep 5 &
	else o=same; /bin/sleep 5 & fi; s=$!; sleep 0.3
	/bin/probe open /proc/$s/mem rw 2>/dev/null; a=$?; /bin/probe open /proc/1/mem rw 2>/dev/null; b=$?
	kill $s; echo $o $a $b'
sb --policy "$T/scratch/ptrace.json" -- /bin/sh -c "$memtry"
got=$OUT
sb -- /bin/sh -c "$memtry"
ctl=$OUT
name="init's memory unreachable with CAP_SYS_PTRACE"
case "$got|$ctl" in
"other 0 13|other 13 13") ok "$name (another uid's opens: $got; without the capability: $ctl)" ;;
# Without the capability the sibling opens too, unless Yama (ptrace_scope 1) refuses a sibling.
"same 0 13|same 0 13" | "same 0 13|same 13 13")
	ok "$name (one id mapped: a same-uid sibling's opens, init's not: $got; without the capability: $ctl)" ;;
*) not_ok "$name" "with it: $got; without: $ctl (fields: which sibling, its open, init's open)" ;;
esac

# --- init's memory holds nothing of the runner's command line ---
# /proc/1/cmdline is readable by anyone in the sandbox; init is a copy of the runner, so it
# showed runbox's whole command line (host paths, policy, manifest). Control: the step's own
# command line, which holds the same canary, shows it.
canary="rbx-argv-canary-$$"
sb -- /bin/sh -c 'i=$(tr "\0" " " </proc/1/cmdline); s=$(tr "\0" " " </proc/$$/cmdline); echo "$i"; echo "$s"' "$canary"
init_line=$(sed -n 1p <<<"$OUT")
self_line=$(sed -n 2p <<<"$OUT")
if [ "$RC" != 0 ]; then not_ok "init's /proc/1/cmdline holds no host command line" "exit $RC: $(first_line "$ERR")"
elif ! grep -q "$canary" <<<"$self_line"; then
	skip "init's /proc/1/cmdline holds no host command line" "control: the step's own cmdline lacks the canary: $self_line"
elif grep -q "$canary" <<<"$init_line"; then not_ok "init's /proc/1/cmdline holds no host command line" "it shows: $init_line"
elif [ "$(echo $init_line)" != runbox-init ]; then not_ok "init's /proc/1/cmdline holds no host command line" "it shows '$init_line', want runbox-init"
else ok "init's /proc/1/cmdline holds no host command line (runbox-init)"; fi

# --- the step's cgroup namespace is rooted at its own cgroup ---
# init's was rooted where init was at its clone: on v1, the runner's own cgroups, so the
# step's /proc/self/cgroup showed host paths (/runbox/<run id>, the runner's slice). Control:
# this test's own /proc/self/cgroup on the host shows a path below the root.
host_cg=$(grep -v ':/$' /proc/self/cgroup | head -n 1)
sb -- /bin/cat /proc/self/cgroup
below=$(grep -v ':/$' <<<"$OUT" | head -n 1)
if [ "$RC" != 0 ] || [ -z "$OUT" ]; then not_ok "the step's cgroups read as / (own cgroup namespace)" "exit $RC: $(first_line "$ERR")"
elif [ -n "$below" ]; then not_ok "the step's cgroups read as / (own cgroup namespace)" "it shows: $below"
elif [ -z "$host_cg" ]; then skip "the step's cgroups read as / (own cgroup namespace)" "control: this test runs in the root cgroups"
else ok "the step's cgroups read as / (own cgroup namespace)"; fi

# --- init and the step are inside the run's cgroup, the runner is not ---
# Seen from the host while a step runs: init (the child of the runner's factory) and the step (init's child)
# share one memory cgroup, whose limit is the run's; the runner's own is another (control).
# init joins before its first byte: on v1 the spawner moves itself and clones init inside.
mem_cg() { # PID: its memory cgroup's path (the v1 memory line, else the v2 line)
	awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; found = 1 } $2 == "" { v2 = $3 }
		END { if (!found) print v2 }' "/proc/$1/cgroup" 2>/dev/null
}
mem_limit() { # CGROUP-PATH: the memory limit there or in its parent (v2 puts init in a leaf)
	local d
	for d in "/sys/fs/cgroup/memory$1" "/sys/fs/cgroup$1" "/sys/fs/cgroup${1%/*}"; do
		for f in memory.limit_in_bytes memory.max; do
			[ -r "$d/$f" ] && [ "$(cat "$d/$f")" != max ] && { cat "$d/$f"; return; }
		done
	done
}
if [ "$MODE" = root ]; then
	rbx_cmd run --image minimal --memory 96M -- /bin/sleep 20
	"${RBX_CMD[@]}" </dev/null >"$T/cg.out" 2>"$T/cg.err" &
	cg_runner=$!
	step_of() { cg_factory=$(pgrep -P "$cg_runner" -x runbox-factory | head -n 1) && [ -n "$cg_factory" ] &&
		cg_init=$(pgrep -P "$cg_factory" -x runbox-init | head -n 1) && [ -n "$cg_init" ] &&
		cg_step=$(pgrep -P "$cg_init" -x sleep | head -n 1) && [ -n "$cg_step" ]; }
	if ! wait_for step_of; then
		not_ok "init and the step are in the run's memory cgroup" "no step after 10 s: $(first_line "$(cat "$T/cg.err")")"
	else
		runner_cg=$(mem_cg "$cg_runner") init_cg=$(mem_cg "$cg_init") step_cg=$(mem_cg "$cg_step")
		limit=$(mem_limit "$init_cg")
		if [ "$init_cg" != "$step_cg" ]; then
			not_ok "init and the step are in the run's memory cgroup" "init in $init_cg, the step in $step_cg"
		elif [ "$init_cg" = "$runner_cg" ]; then
			not_ok "init and the step are in the run's memory cgroup" "init is in the runner's: $runner_cg"
		elif [ "$limit" != $((96 << 20)) ]; then
			not_ok "init and the step are in the run's memory cgroup" "$init_cg has limit '$limit', not 96M"
		else ok "init and the step are in the run's memory cgroup (96M), the runner in its own"; fi
	fi
	kill -TERM "$cg_runner" 2>/dev/null
	wait "$cg_runner" 2>/dev/null || true
fi
