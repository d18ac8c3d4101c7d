#!/usr/bin/env bash
# The run's gateway runs in the run's cgroup (its "gateway" leaf), so the run's cpu limit bounds
# what a request flood costs the host; the leaf goes with the run, and with `runbox gc` after a
# kill -9. Where a run has no cgroup (rootless without delegation) the result says the gateway
# is not bounded, as it says of the run's limits.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init gwcgroup

# FLOOD SECONDS: pipelined requests, 64 to a write, as fast as the step can send them, for
# SECONDS; prints how many were answered. Cheap for the client, costly for the gateway.
FLOOD='
import os, socket, sys, time, urllib.parse
u = urllib.parse.urlparse(os.environ["RUNBOX_API_URL"])
req = ("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n" * 64).encode()
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    try:
        for _ in range(20):
            s.sendall(req)
            got = 0
            while got < 64:
                b = s.recv(1 << 16)
                if not b:
                    raise EOFError
                got += b.count(b"HTTP/1.1 ")
            n += 64
    except (OSError, EOFError):
        pass
    s.close()
print(n)'
QUOTA=0.25
# The kernel's bandwidth control overshoots by at most a period's worth; 25% + 0.03 cores of
# slack, against a control that runs several times over it.
LIMIT=$("$PY" -c "print($QUOTA * 1.25 + 0.03)")
# Root runs make their cgroups under a parent of this test's own, so it can find them.
PARENT=rbx-gwcg-$$
[ "$MODE" = root ] && RBX_ENV=("RUNBOX_CGROUP_PARENT=/$PARENT")
cg_cleanup() {
	rmdir /sys/fs/cgroup/*/"$PARENT" /sys/fs/cgroup/"$PARENT" 2>/dev/null
	lib_cleanup
}
trap cg_cleanup EXIT

# The run's cgroup directories (each hierarchy's, or the v2 one) of run ID.
run_dirs() { find /sys/fs/cgroup -maxdepth 3 -type d -path "*/$PARENT/$1" 2>/dev/null; }
# cpu_us ID: the run's cgroup's total CPU (its subtree: the steps and the gateway), in us.
cpu_us() {
	local d
	for d in $(run_dirs "$1"); do
		if [ -r "$d/cpuacct.usage" ]; then echo $(($(cat "$d/cpuacct.usage") / 1000)); return; fi
		if [ -r "$d/cpu.stat" ]; then sed -n 's/^usage_usec //p' "$d/cpu.stat"; return; fi
	done
}
# in_run PID ID: every line of PID's /proc/PID/cgroup for a controller runbox uses (memory,
# cpu, pids on v1; the unified line on v2) lies in run ID's cgroup; prints the lines otherwise.
in_run() {
	local unified=0
	[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && unified=1
	"$PY" - "/proc/$1/cgroup" "/$PARENT/$2" "$unified" <<'EOF'
import sys
want, unified, seen, bad = sys.argv[2], sys.argv[3] == "1", 0, []
for line in open(sys.argv[1]):
    _, ctrls, path = line.rstrip("\n").split(":", 2)
    # v1 lines of the controllers runbox limits with; the unified line only on a v2 host (on
    # a hybrid one its controllers are on v1).
    if (ctrls and not set(ctrls.split(",")) & {"memory", "cpu", "pids"}) or (not ctrls and not unified):
        continue
    if path == want or path.startswith(want + "/"):
        seen += 1
    else:
        bad.append(line.strip())
print("; ".join(bad) or "no line of a limited controller")
sys.exit(0 if seen and not bad else 1)
EOF
}
gw_pid() { pgrep -P "$1" -x runbox-gateway | head -n 1; }
state_id() { find "$STATE/run" -maxdepth 1 -name '*.state' 2>/dev/null | head -n 1 | xargs -r basename | sed 's/\.state$//'; }

# flood_bg CPUS SECONDS: the flood under --cpus CPUS in the background (BG), its result into
# $T/out; waits until its gateway runs (GW, its pid) and sets ID. RATE: in root mode the run's
# cgroup's CPU per wall second over two seconds of the flood.
flood_bg() {
	GW="" ID="" RATE=""
	rbx_cmd run --json --net gateway --image host --cpus "$1" -- python3 -c "$FLOOD" "$2"
	"${RBX_CMD[@]}" >"$T/out" 2>"$T/err" </dev/null &
	BG=$!
	wait_for eval 'GW=$(gw_pid "$BG"); [ -n "$GW" ]'
	ID=$(state_id)
	if [ "$MODE" = root ] && [ -n "$ID" ]; then
		sleep 1
		local u1 t1 u2 t2
		u1=$(cpu_us "$ID") t1=$(date +%s%N)
		sleep 2
		u2=$(cpu_us "$ID") t2=$(date +%s%N)
		[ -n "$u1" ] && [ -n "$u2" ] && RATE=$("$PY" -c "print(($u2 - $u1) * 1000 / ($t2 - $t1))")
	fi
}
# The step's CPU and the gateway's (its rusage, wherever it ran) per wall second of the step.
total_rate() { rj "(r['resources'].get('cpu_usec', r['cpu']['user_ms'] * 1000 + r['cpu']['system_ms'] * 1000) / 1000 + r['gateway']['cpu_ms']) / r['wall_ms']"; }
below() { "$PY" -c "import sys; sys.exit(0 if float('$1') <= float('$2') else 1)" 2>/dev/null; }

flood_bg "$QUOTA" 6
if [ -z "$GW" ]; then
	not_ok "the gateway starts for a flood" "no runbox-gateway child of runbox: $(first_line "$(cat "$T/err")")"
	kill "$BG" 2>/dev/null
fi
if [ -n "$GW" ]; then
	# It holds the connectors' secrets: no core file (soft and hard limit 0; control: the
	# runner's hard limit is not) and, rootless, undumpable: its /proc/PID files are root's,
	# so no other process of its uid can ptrace it or read its memory (control: the runner's
	# are its own uid's). Not under `unshare -r`: there the namespace's root, which owns an
	# undumpable process's files, is the caller's own uid outside.
	gw_core=$(awk '/^Max core file size/ {print $5 "/" $6}' "/proc/$GW/limits" 2>/dev/null)
	rn_core=$(awk '/^Max core file size/ {print $6}' "/proc/$BG/limits" 2>/dev/null)
	if [ "$gw_core" = 0/0 ] && [ -n "$rn_core" ] && [ "$rn_core" != 0 ]; then ok "the gateway can write no core file (limit 0/0; control: the runner's hard limit $rn_core)"
	else not_ok "the gateway can write no core file" "gateway $gw_core, runner hard $rn_core"; fi
	if [ "$MODE" = user ] || [ "$MODE" = subids ]; then
		gw_own=$(stat -c %u "/proc/$GW/mem" 2>/dev/null) rn_own=$(stat -c %u "/proc/$BG/mem" 2>/dev/null)
		if [ "$gw_own" = 0 ] && [ "$rn_own" = "$NOBODY" ]; then ok "the gateway is undumpable: its /proc/PID/mem is root's (control: the runner's is uid $rn_own's)"
		else not_ok "the gateway is undumpable" "gateway's /proc/PID/mem uid $gw_own, runner's $rn_own"; fi
	fi
fi
if [ "$MODE" = root ] && [ -n "$GW" ]; then
	sleep 30 &
	outside=$!
	if why=$(in_run "$GW" "$ID"); then ok "the gateway's /proc/PID/cgroup is in the run's cgroup"
	else not_ok "the gateway's /proc/PID/cgroup is in the run's cgroup" "$why; $(tr '\n' ' ' <"/proc/$GW/cgroup")"; fi
	if ! in_run "$outside" "$ID" >/dev/null; then ok "control: a process the test started is not in the run's cgroup"
	else not_ok "control: a process the test started is not in the run's cgroup" "$(tr '\n' ' ' <"/proc/$outside/cgroup")"; fi
	if ! in_run "$BG" "$ID" >/dev/null; then ok "control: the runner itself is not in the run's cgroup"
	else not_ok "control: the runner itself is not in the run's cgroup" "$(tr '\n' ' ' <"/proc/$BG/cgroup")"; fi
	kill "$outside" 2>/dev/null
	wait "$outside" 2>/dev/null
	leaves=$(for d in $(run_dirs "$ID"); do [ -d "$d/gateway" ] && echo "$d/gateway"; done | wc -l)
	if [ "$leaves" -gt 0 ]; then ok "the run's cgroup has a gateway leaf while the gateway runs ($leaves)"
	else not_ok "the run's cgroup has a gateway leaf while the gateway runs" "none under $(run_dirs "$ID" | tr '\n' ' ')"; fi
elif [ -n "$GW" ]; then
	# Rootless: runbox's runs have no cgroup here unless the session delegates one (see the
	# result's limits below); the gateway then stays where runbox itself runs.
	RUNNER_CG=$(cat "/proc/$BG/cgroup" 2>/dev/null)
	GW_CG=$(cat "/proc/$GW/cgroup" 2>/dev/null)
fi
wait "$BG"
RC=$?
check "the flood step ends and exits 0" "r['status'] == 'exited' and r['exit_code'] == 0 and int(r['stdout']) > 0" "[r['status'], r.get('stdout'), r.get('stderr', '')[:300]]"
enforced=$(rj "r['limits']['cpus']['enforced']")
rate=$(total_rate)
if [ "$enforced" = true ]; then
	check "the result says the gateway runs in the run's cgroup" \
		"r['gateway']['cgroup']['enforced'] is True and 'leaf \`gateway\`' in r['gateway']['cgroup']['mechanism']" "r['gateway']"
	if below "$rate" "$LIMIT"; then ok "under --cpus $QUOTA the step and its gateway together use at most the quota ($rate cores)"
	else not_ok "under --cpus $QUOTA the step and its gateway together use at most the quota" "$rate cores, limit $LIMIT; $(rj "[r['resources'], r['gateway']]")"; fi
	if [ "$MODE" = root ]; then
		if [ -n "$RATE" ] && below "$RATE" "$LIMIT"; then ok "under --cpus $QUOTA the run's cgroup uses at most the quota mid-flood ($RATE cores)"
		else not_ok "under --cpus $QUOTA the run's cgroup uses at most the quota mid-flood" "'$RATE' cores, limit $LIMIT"; fi
		if [ -z "$(run_dirs "$ID")" ] && [ -n "$ID" ]; then ok "the run's cgroup and its gateway leaf are gone after the run"
		else not_ok "the run's cgroup and its gateway leaf are gone after the run" "left: $(run_dirs "$ID" | tr '\n' ' ')"; fi
	fi
	# Control: the same flood under a quota six times larger goes past the first one's limit,
	# so the limit above is what held it. A host busy with other work can starve one attempt
	# (the control then cannot tell): up to three, the first that shows it counts.
	for attempt in 1 2 3; do
		flood_bg 1.5 6
		wait "$BG"
		RC=$?
		rate=$(total_rate)
		[ -n "$rate" ] && ! below "$rate" "$LIMIT" && { [ "$MODE" != root ] || { [ -n "$RATE" ] && ! below "$RATE" "$LIMIT"; }; } && break
		note "control attempt $attempt: $rate cores in all, ${RATE:-?} mid-flood"
	done
	if [ -n "$rate" ] && ! below "$rate" "$LIMIT"; then ok "control: under --cpus 1.5 the same flood uses more ($rate cores)"
	else not_ok "control: under --cpus 1.5 the same flood uses more than $LIMIT cores" "'$rate'; $(first_line "$(cat "$T/err")")"; fi
	if [ "$MODE" = root ]; then
		if [ -n "$RATE" ] && ! below "$RATE" "$LIMIT"; then ok "control: under --cpus 1.5 the run's cgroup uses more mid-flood ($RATE cores)"
		else not_ok "control: under --cpus 1.5 the run's cgroup uses more than $LIMIT cores mid-flood" "'$RATE'"; fi
	fi
else
	# No cgroup for the run: neither the step nor the gateway is held, and the result says so
	# of both, with the same reason; the gateway is where the runner is (control: as root it
	# is not, above).
	check "the result says the gateway is not in a cgroup of the run, and why" \
		"r['gateway']['cgroup']['enforced'] is False and r['limits']['cpus']['reason'] in r['gateway']['cgroup']['reason']" "[r['gateway'], r['limits']['cpus']]"
	if [ -n "${GW_CG:-}" ] && [ "$GW_CG" = "$RUNNER_CG" ]; then ok "without a cgroup for the run the gateway runs in the runner's cgroup, as the result says"
	else not_ok "without a cgroup for the run the gateway runs in the runner's cgroup, as the result says" "gateway: ${GW_CG:-?}; runner: ${RUNNER_CG:-?}"; fi
fi

# --- kill -9 of runbox mid-flood: `runbox gc` leaves no cgroup of the run, gateway leaf included ---
if [ "$MODE" = root ]; then
	flood_bg "$QUOTA" 60
	if [ -z "$GW" ] || [ -z "$ID" ]; then
		not_ok "gc after kill -9 leaves no gateway leaf" "the flood's gateway did not start (gw '$GW', run '$ID')"
		kill "$BG" 2>/dev/null
	else
		leaves=$(for d in $(run_dirs "$ID"); do [ -d "$d/gateway" ] && echo x; done | wc -l)
		kill -KILL "$BG"
		wait "$BG" 2>/dev/null
		if [ "$leaves" -gt 0 ] && [ -n "$(run_dirs "$ID")" ]; then ok "control: the killed run left its cgroup with a gateway leaf for gc"
		else not_ok "control: the killed run left its cgroup with a gateway leaf for gc" "$leaves leaves; $(run_dirs "$ID" | tr '\n' ' ')"; fi
		run_rbx gc
		left=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$ID" 2>/dev/null | wc -l)
		if [ "$RC" = 0 ] && [ "$left" = 0 ]; then ok "gc after kill -9 leaves no cgroup of the run, its gateway leaf included"
		else not_ok "gc after kill -9 leaves no cgroup of the run, its gateway leaf included" "gc exit $RC, $left left: $(first_line "$ERR")"; fi
		if wait_for eval '! kill -0 "$GW" 2>/dev/null'; then ok "the killed run's gateway is gone"
		else not_ok "the killed run's gateway is gone" "pid $GW still runs"; kill -9 "$GW"; fi
	fi
fi

# --- runbox check resolves the parent by the runs' own rule (rb_cgroup_parent): a ".." that
# runs refuse is refused there too; control: a plain parent is named and not refused ---
RBX_ENV=("RUNBOX_CGROUP_PARENT=/$PARENT/../x")
run_rbx check
if grep -q "RUNBOX_CGROUP_PARENT=/$PARENT/../x is refused" <<<"$OUT"; then ok "runbox check refuses a parent with .. as runs do"
else not_ok "runbox check refuses a parent with .. as runs do" "$(grep -i 'cgroup mode' <<<"$OUT" | cut -c 1-300)"; fi
RBX_ENV=("RUNBOX_CGROUP_PARENT=/$PARENT")
run_rbx check
if grep -q "RUNBOX_CGROUP_PARENT=/$PARENT" <<<"$OUT" && ! grep -q "is refused" <<<"$OUT"; then ok "control: runbox check takes a plain parent"
else not_ok "control: runbox check takes a plain parent" "$(grep -i 'cgroup mode' <<<"$OUT" | cut -c 1-300)"; fi
