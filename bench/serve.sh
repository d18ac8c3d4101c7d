#!/usr/bin/env bash
# `make bench-serve`: runbox serve against the host, in one run, as root: a process round trip
# in a live session (start `true`, wait) against a host posix_spawn of the same static
# busybox; create-to-first-command, cold and from the warm pool; memory per idle session
# (BENCH_IDLE of them, 100 by default; past them it extrapolates, and says so). Prints a table
# with ratios and writes build/bench-serve/results.json. Docker is measured only where its
# engine answers (`docker info`); otherwise the table says so, with no figure.
# Knobs: BENCH_RTT (300 round trips), BENCH_CREATES (30 each), BENCH_IDLE (100).
set -euo pipefail

cd "$(dirname "$0")/.."
TOP=$(pwd)
OUT=$TOP/build/bench-serve
RTT_N=${BENCH_RTT:-300}
CREATES=${BENCH_CREATES:-30}
IDLE=${BENCH_IDLE:-100}
BUSYBOX=$TOP/build/images/minimal/rootfs/bin/busybox

die() { echo "bench-serve: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
[ -x "$BUSYBOX" ] || die "no minimal image (make all)"
for t in curl python3 gcc; do command -v "$t" >/dev/null || die "missing $t"; done
mkdir -p "$OUT"
gcc -O2 -o "$OUT/serve_bench" bench/serve_bench.c $(pkg-config --cflags --libs jansson)
W=$(mktemp -d /tmp/rbx-bench-serve.XXXXXX)
chmod 0711 "$W" # the sandboxes' ids search it down to their run directories
DPID=""
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT

# daemon NAME ARGS...: a runbox serve on $W/NAME.sock with its own state; DPID, SOCK.
daemon() {
	local name=$1
	shift
	SOCK=$W/$name.sock
	"$TOP/runbox" serve --socket "$SOCK" --state-dir "$W/state" "$@" >"$W/$name.log" 2>&1 &
	DPID=$!
	for _ in $(seq 200); do [ -S "$SOCK" ] && return 0; sleep 0.05; done
	die "runbox serve did not start: $(cat "$W/$name.log")"
}
stop() {
	kill "$DPID"
	wait "$DPID" || true
	DPID=""
}
api() { curl -s --unix-socket "$SOCK" -X "$1" ${3+--data-binary "$3"} "http://runbox$2"; }

echo "bench-serve: host posix_spawn of busybox true ($RTT_N runs)"
SPAWN=$("$OUT/serve_bench" - spawn "$BUSYBOX" "$RTT_N")
daemon cold
echo "bench-serve: round trip in a live session ($RTT_N runs)"
RTT=$("$OUT/serve_bench" "$SOCK" rtt "$RTT_N")
echo "bench-serve: create-to-first-command, cold ($CREATES runs)"
COLD=$("$OUT/serve_bench" "$SOCK" create '{"image": "minimal"}' "$CREATES")
stop
daemon pooled --pool minimal:default=4
echo "bench-serve: create-to-first-command, from the warm pool ($CREATES runs)"
POOLED=$("$OUT/serve_bench" "$SOCK" create '{"image": "minimal"}' "$CREATES")
stop

# Memory: $IDLE idle sessions on a daemon without a pool. Pss of the daemon and of every
# process of every sandbox (the factory's descendants); the kernel's own memory (Slab,
# PageTables, KernelStack, Percpu: namespaces, mounts, nftables tables, page tables), which is
# system-wide, so other work on the host moves it too; the sessions' cgroups' usage where the
# memory controller is there; and MemAvailable's fall (everything, page cache of other work
# too: the noisiest). Measured before and after, the difference divided by $IDLE.
daemon idle --max-sessions $((IDLE + 8)) --max-sessions-per-tenant $((IDLE + 8))
sleep 1
mem() {
	python3 - "$DPID" <<'PY'
import json, os, sys
daemon = int(sys.argv[1])
kids = {}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(p))
def pss(pid):
    try:
        for line in open(f"/proc/{pid}/smaps_rollup"):
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0
def tree(pid):
    out = [pid]
    for k in kids.get(pid, []):
        out += tree(k)
    return out
sandboxes = sum(pss(p) for k in kids.get(daemon, []) for p in tree(k)[1:])  # below the factory
mi = {l.split(":")[0]: int(l.split()[1]) * 1024 for l in open("/proc/meminfo")}
kernel = sum(mi.get(k, 0) for k in ("Slab", "PageTables", "KernelStack", "Percpu"))
print(json.dumps({"daemon_pss": pss(daemon), "sandbox_pss": sandboxes, "mem_available": mi["MemAvailable"],
                  "kernel": kernel}))
PY
}
cgroup_usage() { # the summed memory usage of the runs' cgroups, or nothing
	local total=0 found=0 f
	for id in "$@"; do
		f=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" 2>/dev/null | while read -r d; do
			[ -f "$d/memory.current" ] && echo "$d/memory.current" && break
			[ -f "$d/memory.usage_in_bytes" ] && echo "$d/memory.usage_in_bytes" && break
		done | head -n 1)
		[ -n "$f" ] && total=$((total + $(cat "$f"))) && found=$((found + 1))
	done
	echo "$found $total"
}
BEFORE=$(mem)
RUNS=()
echo "bench-serve: $IDLE idle sessions"
for i in $(seq "$IDLE"); do
	r=$(api POST /v1/sessions '{"image": "minimal"}')
	RUNS+=("$(printf '%s' "$r" | python3 -c 'import json,sys; print(json.load(sys.stdin)["run_id"])')")
done
sleep 2
AFTER=$(mem)
CG=$(cgroup_usage "${RUNS[@]}")
stop

DOCKER="not measured: Docker's engine does not run on this machine"
if command -v docker >/dev/null; then
	if docker info >/dev/null 2>&1; then DOCKER="engine answers, but docker exec is not timed by this script"
	else DOCKER="not measured: the docker client is installed, its engine does not run here (docker info fails)"; fi
fi

python3 - "$SPAWN" "$RTT" "$COLD" "$POOLED" "$BEFORE" "$AFTER" "$CG" "$IDLE" "$DOCKER" "$OUT/results.json" <<'PY'
import json, sys
spawn, rtt, cold, pooled, before, after = (json.loads(a) for a in sys.argv[1:7])
cg_found, cg_total = (int(x) for x in sys.argv[7].split())
idle, docker, out = int(sys.argv[8]), sys.argv[9], sys.argv[10]
load = open("/proc/loadavg").read().split()[:3]
per = lambda k: (after[k] - before[k]) / idle
daemon_pss, sandbox_pss, kernel = per("daemon_pss"), per("sandbox_pss"), per("kernel")
avail = (before["mem_available"] - after["mem_available"]) / idle
mib = 1 << 20
rows = [
    ("host posix_spawn + waitpid (busybox true)", spawn),
    ("round trip in a live session (start true, wait)", rtt),
    ("create-to-first-command, cold", cold),
    ("create-to-first-command, warm pool", pooled),
]
print()
print(f"{'':52} {'median':>9} {'p95':>9} {'n':>5}")
for name, r in rows:
    print(f"{name:52} {r['median_ms']:8.3f}ms {r['p95_ms']:8.3f}ms {r['n']:5d}")
print()
print(f"round trip - posix_spawn:        {rtt['median_ms'] - spawn['median_ms']:.3f} ms (target: within 0.1 ms)")
print(f"round trip / posix_spawn:        {rtt['median_ms'] / spawn['median_ms']:.2f}x")
print(f"cold / pooled create:            {cold['median_ms'] / pooled['median_ms']:.2f}x "
      f"(pooled {pooled['median_ms']:.2f} ms, target under 2 ms; {pooled['pooled']}/{pooled['n']} took a member)")
print(f"create's own reply, cold / pooled: {cold['create_reply']['median_ms']:.2f} / {pooled['create_reply']['median_ms']:.2f} ms")
print(f"docker exec true:                {docker}")
print()
print(f"memory per idle session ({idle} sessions measured):")
print(f"  daemon Pss                     {daemon_pss / 1024:8.1f} KiB")
print(f"  sandbox processes' Pss         {sandbox_pss / 1024:8.1f} KiB")
if cg_found:
    print(f"  cgroup usage (page cache, kernel memory charged to it) {cg_total / cg_found / 1024:8.1f} KiB ({cg_found} cgroups)")
print(f"  kernel (Slab, PageTables, ...) {kernel / 1024:8.1f} KiB (system-wide: other work moves it)")
print(f"  MemAvailable's fall            {avail / 1024:8.1f} KiB (everything, other work's page cache too)")
each = daemon_pss + sandbox_pss + kernel
print(f"  per session (Pss + kernel)     {each / 1024:8.1f} KiB")
how = "measured" if idle >= 1000 else f"extrapolated from {idle} (not measured)"
print(f"  1,000 idle sessions, {how}: {each * 1000 / (1 << 30):.2f} GiB "
      f"(target under 2 GiB); by MemAvailable's fall {avail * 1000 / (1 << 30):.2f} GiB")
print(f"load average during the run: {load}")
json.dump({"spawn": spawn, "round_trip": rtt, "create_cold": cold, "create_pooled": pooled,
           "idle": {"sessions": idle, "daemon_pss_per": daemon_pss, "sandbox_pss_per": sandbox_pss,
                    "mem_available_fall_per": avail, "kernel_per": kernel, "cgroups": cg_found,
                    "cgroup_usage_per": cg_total / cg_found if cg_found else None},
           "docker": docker, "loadavg": load}, open(out, "w"), indent=1)
PY
