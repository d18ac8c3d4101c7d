#!/usr/bin/env bash
# Lifecycle: runbox's own PID 1 reaps orphans; a step ends at its main process's exit while
# daemons it left behind die with the run; a step a leftover keeps stopped ends at its deadline;
# SIGTERM and SIGKILL of runbox end the sandbox;
# after a few hundred runs no mount, process, cgroup or run directory is left behind.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init lifecycle

# PID 1 reaps reparented orphans: a double-forked child that exits must not stay a zombie.
sb -- /bin/sh -c '( /bin/probe exit 0 & ) ; i=0
	while [ $i -lt 50 ]; do
		z=$(grep -l "^State:.*Z" /proc/[0-9]*/status 2>/dev/null)
		[ -z "$z" ] && { echo reaped; exit 0; }
		sleep 0.1; i=$((i + 1))
	done; echo "zombie: $z"; exit 1'
if [ "$RC" = 0 ] && [ "$OUT" = reaped ]; then ok "PID 1 reaps orphans"
else not_ok "PID 1 reaps orphans" "exit $RC: $(first_line "$OUT") $(first_line "$ERR")"; fi

# A daemon left behind does not hold the step open, and is gone when the run ends.
# Control: the same daemon started on the host is found by the same scan.
m=$(new_marker)
"$PROBE" daemonize "$T/scratch/ctl.pid" "$m-ctl"
if wait_for has_marker "$m-ctl"; then ctl=0; else ctl=1; fi
for p in $(pids_with "$m-ctl"); do kill "$p"; done
sb -- /bin/probe daemonize /tmp/daemon.pid "$m"
if [ "$RC" != 0 ]; then not_ok "a double-forked daemon is gone after the run" "exit $RC: $(first_line "$ERR")"
elif ! wait_for no_marker "$m"; then
	not_ok "a double-forked daemon is gone after the run" "still running: $(pids_with "$m" | tr '\n' ' ')"
	for p in $(pids_with "$m"); do kill -9 "$p"; done
elif [ $ctl != 0 ]; then skip "a double-forked daemon is gone after the run" "control: host daemon not found by the scan"
else ok "a double-forked daemon is gone after the run"; fi

# A process left by step 1 stops every newer process with SIGSTOP: step 2's shell or its
# `sleep`, well within the second it runs, and step 2's process before its execve when the
# scan gets there first (init then waits in CLONE_VFORK). The run still ends at step 2's
# deadline, as a timeout, and nothing of it is left. Control: without the stopper, step 2 runs.
stopper_run() { # MARKER WITH_STOPPER(0|1): a two-step manifest; result in $T/out
	local first='true'
	[ "$2" = 1 ] && first="sh -c 'me=\$\$; while :; do for p in /proc/[0-9]*; do n=\${p#/proc/}; [ \"\$n\" -gt \"\$me\" ] 2>/dev/null && kill -STOP \"\$n\" 2>/dev/null; done; done' $1 >/dev/null 2>&1 &"
	"$PY" - "$T/scratch/stopper.json" "$first" <<'EOF'
import json, sys
json.dump({"tenant": "t", "agent": "a", "image": "minimal",
           "steps": [{"name": "first", "script": sys.argv[2]},
                     {"name": "victim", "script": "sleep 1; echo victim-ran", "timeout": "3s"}]},
          open(sys.argv[1], "w"))
EOF
	chmod a+r "$T/scratch/stopper.json"
	run_manifest "$T/scratch/stopper.json" 60
}
m=$(new_marker)
stopper_run "$m" 0
check "control: step 2 runs without the stopper" \
	"r['exit'] == 0 and r['steps'][1]['stdout'] == 'victim-ran\n'" "r['steps'][1]"
stopper_run "$m" 1
if [ "$RC" = 124 ] && [ "$(rj "r['steps'][1]['status']")" = timed_out ] && [ "$(rj "r['steps'][1]['stdout']")" = "" ]; then
	if wait_for no_marker "$m"; then ok "a stopped step's process ends at its deadline (124), nothing left"
	else
		not_ok "a stopped step's process ends at its deadline (124), nothing left" "still running: $(pids_with "$m" | tr '\n' ' ')"
		for p in $(pids_with "$m"); do kill -9 "$p"; done
	fi
else not_ok "a stopped step's process ends at its deadline (124), nothing left" "exit $RC: $(rj "r['steps'][1]" | cut -c 1-200) $(first_line "$ERR")"; fi

# start_bg MARKER: runbox running `probe sleep-forever MARKER` in the background; BG is its pid.
start_bg() {
	rbx_cmd run --image minimal --timeout 60s -- /bin/probe sleep-forever "$1"
	"${RBX_CMD[@]}" >/dev/null 2>"$T/bg.err" </dev/null &
	BG=$!
	wait_for has_marker --prefix "/bin/probe sleep-forever $1"
}

# SIGTERM to runbox: the step gets it and the sandbox ends; runbox exits 128+15 (or 124/143).
m=$(new_marker)
if ! start_bg "$m"; then not_ok "SIGTERM to runbox ends the sandbox" "the step never started: $(first_line "$(cat "$T/bg.err")")"
else
	kill -TERM "$BG"
	wait "$BG"
	rc=$?
	if ! wait_for no_marker "$m"; then not_ok "SIGTERM to runbox ends the sandbox" "step still running"
	elif [ "$rc" = 125 ]; then not_ok "SIGTERM to runbox ends the sandbox" "runbox exit 125: $(first_line "$(cat "$T/bg.err")")"
	else ok "SIGTERM to runbox ends the sandbox (exit $rc)"; fi
fi
m=$(new_marker)
if ! start_bg "$m"; then not_ok "SIGINT to runbox ends the sandbox" "the step never started"
else
	kill -INT "$BG"
	wait "$BG"
	if wait_for no_marker "$m"; then ok "SIGINT to runbox ends the sandbox"
	else not_ok "SIGINT to runbox ends the sandbox" "step still running"; fi
fi
# SIGKILL to runbox: PID 1 dies with its parent (PR_SET_PDEATHSIG), and the step with it.
m=$(new_marker)
if ! start_bg "$m"; then not_ok "SIGKILL to runbox ends the sandbox" "the step never started"
else
	# While the step runs, the run's state file holds the command, written ahead of the
	# ledger's commit (which runs beside the step's start), and only its owner may read it.
	st=$(find "$STATE/run" -maxdepth 1 -name '*.state' 2>/dev/null | head -1)
	if [ -n "$st" ] && grep -q "sleep-forever.*$m" "$st" && grep -q '"write_ahead"' "$st"; then
		ok "the state file holds the running step's command, written ahead"
	else not_ok "the state file holds the running step's command, written ahead" "${st:-no state file}"; fi
	mode=$(stat -c %a "$st" 2>/dev/null)
	if [ "$mode" = 600 ]; then ok "the state file is private (0600)"
	else not_ok "the state file is private (0600)" "mode ${mode:-none}"; fi
	kill -KILL "$BG"
	wait "$BG" 2>/dev/null
	if wait_for no_marker "$m"; then ok "SIGKILL to runbox ends the sandbox"
	else
		not_ok "SIGKILL to runbox ends the sandbox" "still running: $(pids_with "$m" | tr '\n' ' ')"
		for p in $(pids_with "$m"); do kill -9 "$p"; done
	fi
	# What a killed runbox leaves in the run dir is `runbox gc`'s job.
	left=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	killed_id=$(find "$STATE/run" -maxdepth 1 -name '*.state' 2>/dev/null | head -1 | xargs -r basename | sed 's/\.state$//')
	run_rbx ps
	if [ -n "$killed_id" ] && grep -q "$killed_id.*abandoned" <<<"$OUT"; then ok "runbox ps shows the killed run as abandoned"
	elif [ -n "$killed_id" ]; then not_ok "runbox ps shows the killed run as abandoned" "$(first_line "$OUT")"
	else not_ok "runbox ps shows the killed run as abandoned" "the killed run left no state file to name it"; fi
	run_rbx gc
	after=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	if [ "$left" = 0 ]; then not_ok "runbox gc cleans up after a killed runbox" "control: the killed runbox left no run dir to clean"
	elif [ "$RC" = 0 ] && [ "$after" = 0 ]; then ok "runbox gc cleans up after a killed runbox"
	else not_ok "runbox gc cleans up after a killed runbox" "gc exit $RC, $after of $left run dirs left"; fi
	if [ -n "$killed_id" ]; then
		# Nothing of it is left in any cgroup hierarchy, and the ledger says it was abandoned.
		cg_left=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "$killed_id" 2>/dev/null | wc -l)
		if [ "$cg_left" = 0 ]; then ok "gc left no cgroup of the killed run"
		else not_ok "gc left no cgroup of the killed run" "$cg_left left"; fi
		run_rbx ledger show "$killed_id"
		if grep -q 'run_end.*abandoned' <<<"$OUT"; then ok "the ledger records the killed run as abandoned"
		else not_ok "the ledger records the killed run as abandoned" "$(tail -1 <<<"$OUT")"; fi
		# Its command was committed beside the step (or, if runbox died first, by gc from
		# the state file): once, never twice. This is the control of the test below.
		n=$(grep -c 'step_start' <<<"$OUT")
		if [ "$n" = 1 ]; then ok "the killed run's command is in the ledger once"
		else not_ok "the killed run's command is in the ledger once" "$n step_start events"; fi
	fi
fi

# A runbox killed after its exec request but before the ledger's commit beside the step: its
# state file holds the events written ahead, and gc commits them before the run's end. The
# state file is made by hand (a dead runner, nothing else left): the real window is a few ms.
wa_id=0aead$(printf '%05x%05x%05x' $RANDOM $RANDOM $RANDOM)
wa_text="written-ahead-$m"
true &
dead=$!
wait $dead
mkdir -p "$STATE/run/$wa_id"
cat >"$STATE/run/$wa_id.state" <<EOF
{"run_id": "$wa_id", "tenant": "local", "agent": "cli", "state_dir": "$STATE", "started": 1,
 "runner_pid": $dead, "runner_start": 1, "init_pid": 0, "init_start": 0, "cgroups": [],
 "write_ahead": {"committed": 0, "events": [
   {"type": "run_start", "data": {"tenant": "local", "agent": "cli"}},
   {"type": "step_start", "data": {"step": 1, "kind": "command", "text": "$wa_text"}}]}}
EOF
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$STATE/run/$wa_id" "$STATE/run/$wa_id.state"
run_rbx gc
run_rbx ledger show "$wa_id" --json
if [ "$RC" = 0 ] && grep -q "$wa_text" <<<"$OUT" && grep -q '"abandoned"' <<<"$OUT" &&
	[ "$(grep -o '"type": *"[a-z_]*"' <<<"$OUT" | tr -d ' ' | paste -sd,)" = \
		'"type":"run_start","type":"step_start","type":"cleanup","type":"run_end"' ]; then
	ok "gc commits what a killed runbox wrote ahead, then the run's end"
else not_ok "gc commits what a killed runbox wrote ahead, then the run's end" "exit $RC: $(first_line "$OUT$ERR")"; fi

# gc acts only on what runbox made. A state file is data: one planted in the run dir with a
# dead runner and cgroups that are not its run's own (a directory of the user's named like
# runbox's, with a live process listed in its cgroup.procs; as root also a real cgroup of
# another run id under a runbox parent, and the same spelled with "..") must kill nothing and
# remove none of them. The control is the killed run above, whose real cgroup gc removed.
pl_id=0b1a$(printf '%05x%05x%05x' $RANDOM $RANDOM $RANDOM)
victim_id=0b1b$(printf '%05x%05x%05x' $RANDOM $RANDOM $RANDOM)
vm=$(new_marker)
X=${T:?}/scratch/x
mkdir -p "$X/victim-runbox" "$X/runbox/$pl_id"
if [ "$MODE" = root ]; then
	"$PROBE" sleep-forever "$vm" </dev/null >/dev/null 2>&1 &
else
	chown -R $NOBODY:$NOBODY "$X"
	as_nobody "$PROBE" sleep-forever "$vm" </dev/null >/dev/null 2>&1 &
fi
disown $!
wait_for has_marker "$vm"
vpid=$(pids_with "$vm" | head -1)
echo "$vpid" >"$X/victim-runbox/cgroup.procs"
echo "$vpid" >"$X/runbox/$pl_id/cgroup.procs"
planted="\"$X/victim-runbox\", \"$X/runbox/$pl_id\""
vcg=""
if [ "$MODE" = root ]; then
	for h in /sys/fs/cgroup/pids /sys/fs/cgroup; do
		case $(stat -f -c %T "$h" 2>/dev/null) in
		cgroupfs | cgroup2fs) vcg=$h/runbox/$victim_id && break ;;
		esac
	done
	if [ -n "$vcg" ] && mkdir -p "$vcg" && echo "$vpid" >"$vcg/cgroup.procs"; then
		planted="$planted, \"$vcg\", \"${vcg%/*}/../runbox/$pl_id\""
	else vcg=""; fi
fi
mkdir -p "$STATE/run/$pl_id"
printf '{"run_id": "%s", "tenant": "local", "agent": "cli", "state_dir": "%s", "started": 1,
 "runner_pid": %s, "runner_start": 1, "init_pid": 0, "init_start": 0, "cgroups": [%s]}\n' \
	"$pl_id" "$STATE" "$dead" "$planted" >"$STATE/run/$pl_id.state"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$STATE/run/$pl_id" "$STATE/run/$pl_id.state"
run_rbx gc
sleep 0.3
if ! has_marker "$vm"; then not_ok "gc kills nothing a planted state file lists" "the victim (pid $vpid) was killed"
elif [ ! -d "$X/victim-runbox" ] || [ ! -d "$X/runbox/$pl_id" ]; then
	not_ok "gc kills nothing a planted state file lists" "a planted directory was removed"
elif [ -n "$vcg" ] && [ ! -d "$vcg" ]; then not_ok "gc kills nothing a planted state file lists" "the other run's cgroup was removed"
elif ! grep -q "refusing to reclaim" <<<"$OUT$ERR"; then
	not_ok "gc kills nothing a planted state file lists" "gc said nothing: $(first_line "$OUT$ERR")"
else ok "gc kills nothing a planted state file lists${vcg:+ (a real cgroup of another run among them)}"; fi
kill -9 "$vpid" 2>/dev/null
wait_for no_marker "$vm"
[ -z "$vcg" ] || wait_for rmdir "$vcg" 2>/dev/null
rm -rf "$X" "${STATE:?}/run/$pl_id" "${STATE:?}/run/$pl_id.state"

# A state file that another user could write, or that is not ours, is not acted on at all:
# its run directory stays and the ledger gets nothing. Control: the same file, made private
# and ours, is cleaned up and recorded.
for how in other-writable not-ours; do
	sf_id=0b1c$(printf '%05x%05x%05x' $RANDOM $RANDOM $RANDOM)
	sf=${STATE:?}/run/$sf_id.state
	mkdir -p "$STATE/run/$sf_id"
	printf '{"run_id": "%s", "tenant": "local", "agent": "cli", "state_dir": "%s", "started": 1,
 "runner_pid": %s, "runner_start": 1, "init_pid": 0, "init_start": 0, "cgroups": []}\n' \
		"$sf_id" "$STATE" "$dead" >"$sf"
	[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$STATE/run/$sf_id" "$sf"
	if [ $how = other-writable ]; then chmod 0666 "$sf"
	elif [ "$MODE" = root ]; then chown $NOBODY "$sf"
	else chown 0 "$sf"; fi
	run_rbx gc
	gc_err=$ERR
	run_rbx ledger show "$sf_id"
	if [ -d "$STATE/run/$sf_id" ] && [ "$RC" = 125 ] && grep -q "$sf_id" <<<"$gc_err"; then
		ok "gc leaves alone a state file that is $how"
	else
		not_ok "gc leaves alone a state file that is $how" \
			"run dir $([ -d "$STATE/run/$sf_id" ] && echo kept || echo removed), ledger show exit $RC, gc: $(first_line "$gc_err")"
	fi
	chmod 0600 "$sf"
	if [ "$MODE" = root ]; then chown 0 "$sf"; else chown $NOBODY "$sf"; fi
	run_rbx gc
	run_rbx ledger show "$sf_id"
	if [ ! -e "$STATE/run/$sf_id" ] && [ ! -e "$sf" ] && grep -q 'run_end.*abandoned' <<<"$OUT"; then
		ok "control: the same state file, private and ours, is cleaned up ($how)"
	else not_ok "control: the same state file, private and ours, is cleaned up ($how)" "exit $RC: $(first_line "$OUT$ERR")"; fi
done

# --- a few hundred runs leave nothing behind ---
N=${RBX_CLEANUP_RUNS:-300}
mounts_before=$(wc -l </proc/self/mountinfo)
rundirs_before=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | sort)
ids=$T/run-ids
: >"$ids"
fails=0
m=$(new_marker)
for i in $(seq "$N"); do
	if [ $((i % 10)) = 0 ]; then
		# Every tenth run leaves a daemon behind and writes to the root and /workspace.
		rbx run --image minimal --json -- /bin/sh -c \
			"/bin/probe daemonize /tmp/d.pid $m; echo x > /etc/x; echo y > /workspace/y" >"$T/out" 2>"$T/err" </dev/null
	else
		rbx run --image minimal --json -- /bin/probe exit 0 >"$T/out" 2>"$T/err" </dev/null
	fi
	rc=$?
	if [ $rc != 0 ]; then
		fails=$((fails + 1))
		[ $fails = 1 ] && note "run $i: exit $rc: $(first_line "$(cat "$T/err")")"
	fi
	json "$T/out" run_id >>"$ids" 2>/dev/null
done
if [ $fails = 0 ]; then ok "$N runs succeed"; else not_ok "$N runs succeed" "$fails failed"; fi
nids=$(grep -c . "$ids")
if [ "$nids" != "$N" ]; then note "only $nids of $N runs reported a run_id"; fi

if wait_for no_marker "$m"; then ok "no process left after $N runs"
else
	not_ok "no process left after $N runs" "$(pids_with "$m" | wc -l) daemons still running"
	for p in $(pids_with "$m"); do kill -9 "$p"; done
fi
# Processes still carrying our state dir in their environment (runbox, its init).
left=""
for p in /proc/[0-9]*; do
	grep -qsaF "RUNBOX_STATE_DIR=$STATE" "$p/environ" && left="$left ${p#/proc/}"
done
if [ -z "$left" ]; then ok "no runbox process left after $N runs"
else not_ok "no runbox process left after $N runs" "pids$left"; fi

# Mounts: none mentions our state dir or a run id; the total is unchanged (other processes on
# the host may mount too, so a change in the total alone is reported, not failed).
leak=$(grep -cF -e "$STATE" /proc/self/mountinfo)
if [ -s "$ids" ]; then leak=$((leak + $(grep -cF -f "$ids" /proc/self/mountinfo))); fi
if [ "$leak" = 0 ]; then ok "no mount left after $N runs"
else not_ok "no mount left after $N runs" "$leak mounts mention the state dir or a run id"; fi
mounts_after=$(wc -l </proc/self/mountinfo)
[ "$mounts_before" = "$mounts_after" ] || note "host mount count changed: $mounts_before -> $mounts_after"

# Run directories and cgroups.
rundirs=$(comm -13 <(echo "$rundirs_before") <(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | sort) | grep -c .)
if [ "$rundirs" = 0 ]; then ok "no run directory left after $N runs"
else not_ok "no run directory left after $N runs" "$rundirs new entries in $STATE/run"; fi
if [ -s "$ids" ]; then
	cg=$(find /sys/fs/cgroup -mindepth 1 -type d 2>/dev/null | grep -cF -f "$ids")
	if [ "$cg" = 0 ]; then ok "no cgroup left after $N runs"
	else not_ok "no cgroup left after $N runs" "$cg cgroup dirs named after our runs"; fi
else
	not_ok "no cgroup left after $N runs" "no run reported a run_id to look for"
fi
