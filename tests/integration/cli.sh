#!/usr/bin/env bash
# The command line as a new user meets it: ps, kill and gc take --state-dir, and every command
# refuses an option it does not know, naming it.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init cli

# A second state directory, the mode's user's own.
OTHER=$T/other
mkdir -p "$OTHER"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$OTHER"

# start_bg_in DIR MARKER: runbox running `probe sleep-forever MARKER` with --state-dir DIR in
# the background; BG is its pid.
start_bg_in() {
	rbx_cmd run --state-dir "$1" --image minimal --timeout 60s -- /bin/probe sleep-forever "$2"
	"${RBX_CMD[@]}" >/dev/null 2>"$T/bg.err" </dev/null &
	BG=$!
	wait_for has_marker --prefix "/bin/probe sleep-forever $2"
}
run_id_in() { find "$1/run" -maxdepth 1 -name '*.state' 2>/dev/null | head -1 | xargs -r basename | sed 's/\.state$//'; }

# ps and kill with --state-dir see the runs of that directory; without it (the default state
# directory, RUNBOX_STATE_DIR here) they do not: the control.
m=$(new_marker)
if ! start_bg_in "$OTHER" "$m"; then
	not_ok "ps --state-dir lists the runs of that directory" "the step never started: $(first_line "$(cat "$T/bg.err")")"
else
	id=$(run_id_in "$OTHER")
	run_rbx ps --state-dir "$OTHER"
	in_other=$OUT
	run_rbx ps
	in_default=$OUT
	if [ -z "$id" ]; then not_ok "ps --state-dir lists the runs of that directory" "no state file in $OTHER/run"
	elif grep -q "$id.*running" <<<"$in_other" && ! grep -q "$id" <<<"$in_default"; then
		ok "ps --state-dir lists the runs of that directory (control: ps without it does not)"
	else not_ok "ps --state-dir lists the runs of that directory" "with: $(first_line "$in_other" | tr '\n' ' ') / without: $(printf '%s' "$in_default" | tr '\n' ' ')"; fi
	run_rbx ps --state-dir="$OTHER" --json
	if [ "$RC" = 0 ] && [ "$(rj "[x['run_id'] for x in r]")" = "[\"$id\"]" ]; then ok "ps --state-dir=DIR --json lists the run"
	else not_ok "ps --state-dir=DIR --json lists the run" "exit $RC: $(first_line "$OUT$ERR")"; fi

	run_rbx kill "$id"
	if [ "$RC" = 125 ] && grep -q "no live run" <<<"$ERR" && has_marker "$m"; then
		ok "control: kill without --state-dir does not find the run"
	else not_ok "control: kill without --state-dir does not find the run" "exit $RC: $(first_line "$ERR")"; fi
	run_rbx kill --state-dir "$OTHER" "$id"
	krc=$RC
	wait "$BG"
	if [ "$krc" = 0 ] && wait_for no_marker "$m"; then ok "kill --state-dir stops the run of that directory"
	else not_ok "kill --state-dir stops the run of that directory" "kill exit $krc: $(first_line "$ERR")"; fi
fi

# gc --state-dir cleans up after a killed runbox of that directory; gc without it leaves it.
m=$(new_marker)
if ! start_bg_in "$OTHER" "$m"; then not_ok "gc --state-dir cleans up that directory" "the step never started"
else
	id=$(run_id_in "$OTHER")
	kill -KILL "$BG"
	wait "$BG" 2>/dev/null
	wait_for no_marker "$m"
	run_rbx gc
	if [ -e "$OTHER/run/$id.state" ] && ! grep -q "$id" <<<"$OUT"; then ok "control: gc without --state-dir leaves the other directory's run"
	else not_ok "control: gc without --state-dir leaves the other directory's run" "exit $RC: $(first_line "$OUT$ERR")"; fi
	run_rbx gc --state-dir "$OTHER"
	left=$(find "$OTHER/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	if [ "$RC" = 0 ] && grep -q "$id: cleaned up" <<<"$OUT" && [ "$left" = 0 ]; then ok "gc --state-dir cleans up the killed run of that directory"
	else not_ok "gc --state-dir cleans up the killed run of that directory" "exit $RC, $left left: $(first_line "$OUT$ERR")"; fi
fi

# Every command refuses an option it does not know (125, naming it); the control is the same
# command without it, which succeeds.
for cmd in "ps" "gc" "kill RUNID" "ledger query" "policy validate default" "check" "run --image minimal -- true"; do
	read -ra words <<<"$cmd"
	run_rbx "${words[@]}"
	ctl=$RC
	[ "${words[0]}" = kill ] && ctl=0 # no such run: the control is that the option is named
	run_rbx "${words[0]}" --no-such-option "${words[@]:1}"
	if [ "$RC" = 125 ] && grep -q -- "--no-such-option" <<<"$ERR"; then
		if [ "$ctl" = 0 ] || { [ "${words[0]}" = check ] && [ "$ctl" = 125 ]; }; then ok "\`runbox ${words[0]}\` refuses an unknown option, naming it"
		else not_ok "\`runbox ${words[0]}\` refuses an unknown option, naming it" "control: without the option it exits $ctl"; fi
	else not_ok "\`runbox ${words[0]}\` refuses an unknown option, naming it" "exit $RC: $(first_line "$ERR")"; fi
done

# A command argument that is not UTF-8 cannot be carried as text: refused (125, naming its
# index) before anything runs or is recorded, never dropped with the later ones shifted (which
# ran `sh -c B`). Control: the same command with valid text runs exactly, and is recorded.
events() { run_rbx ledger query --json; rj "len(r)" 2>/dev/null || echo 0; }
before=$(events)
sb -- /bin/sh -c $'echo A\xff' -c 'echo B'
after=$(events)
if [ "$RC" = 125 ] && grep -q "argument 3 .*not valid UTF-8" <<<"$ERR" && [ -z "$OUT" ] && [ "$before" = "$after" ]; then
	ok "a non-UTF-8 argument is refused (125, its index named), nothing run or recorded"
else not_ok "a non-UTF-8 argument is refused (125, its index named), nothing run or recorded" "exit $RC, out '$OUT', events $before -> $after: $(first_line "$ERR")"; fi
sb -- /bin/sh -c 'echo A' -c 'echo B'
if [ "$RC" = 0 ] && [ "$OUT" = A ]; then
	run_rbx ledger query --type step_start --json
	if [ "$(rj "r[-1]['data']['text']")" = '["/bin/sh","-c","echo A","-c","echo B"]' ]; then ok "control: a valid command runs and is recorded exactly"
	else not_ok "control: a valid command runs and is recorded exactly" "$(rj "r[-1]['data']" | cut -c 1-200)"; fi
else not_ok "control: a valid command runs and is recorded exactly" "exit $RC, out '$OUT': $(first_line "$ERR")"; fi

# Printed JSON never carries DEL or a C1 control (U+0085 NEL, U+009B CSI) raw: a step's output
# in the result and a command in the ledger's export come escaped (\u0085, \u007f) and decode
# to the same text. Control: ordinary UTF-8 (é) is printed as it is.
raw_controls() { LC_ALL=C grep -c $'\x7f\|\xc2[\x80-\x9f]' "$1"; }
sb --json -- printf $'a\302\205b\177c\302\233d'
if [ "$RC" = 0 ] && [ "$(raw_controls "$T/out")" = 0 ] && grep -qF '\u0085' "$T/out" && grep -qF '\u007f' "$T/out" &&
	[ "$(rj "r['stdout'] == 'a\x85b\x7fc\x9bd'")" = true ]; then ok "C1 controls and DEL in a step's output are escaped in the JSON result"
else not_ok "C1 controls and DEL in a step's output are escaped in the JSON result" "exit $RC: $(LC_ALL=C grep -a stdout "$T/out" | od -c | head -3 | tr '\n' ' ')"; fi
run_rbx ledger export --jsonl
if [ "$RC" = 0 ] && grep -qF 'printf' "$T/out" && [ "$(raw_controls "$T/out")" = 0 ] && grep -qF '\u0085' "$T/out"; then ok "the ledger's export escapes them too"
else not_ok "the ledger's export escapes them too" "exit $RC, $(raw_controls "$T/out") raw lines"; fi
sb --json -- printf 'caf\303\251'
if [ "$RC" = 0 ] && grep -q $'caf\xc3\xa9' "$T/out" && [ "$(rj "r['stdout']")" = $'caf\xc3\xa9' ]; then ok "control: UTF-8 text (é) stays as it is in the JSON result"
else not_ok "control: UTF-8 text (é) stays as it is in the JSON result" "exit $RC: $(grep stdout "$T/out")"; fi

# A message naming something the sandbox chose is shown, never obeyed: a harvested file named
# with terminal escapes, in the store's write error (the store is a file here, so every store
# fails), reaches stderr as \x1b[31m text, on one line. Control: the same failure with a plain
# name prints the name as it is.
store_fail_run() { # NAME: harvest a file called NAME into a broken store; $T/err holds stderr
	local st=$T/st-$RANDOM
	mkdir -p "$st" && : >"$st/artifacts"
	[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$st"
	"$PY" - "$T/scratch/name.json" "$1" <<'PYEOF'
import json, sys
json.dump({"tenant": "t", "agent": "a", "image": "minimal",
           "steps": [{"name": "s", "script": "mkdir -p /workspace/out; printf x > \"/workspace/out/$N\"",
                      "env": {"N": sys.argv[2]}}]}, open(sys.argv[1], "w"))
PYEOF
	chmod a+r "$T/scratch/name.json"
	run_rbx run --state-dir "$st" "$T/scratch/name.json" --json
}
store_fail_run $'a\e[31mred\e]0;title\a'
if grep -qF 'harvest `a\x1b[31mred\x1b]0;title\x07`' "$T/err" && ! LC_ALL=C grep -q $'\e\|\a' "$T/err"; then
	ok "a sandbox-chosen file name in a store error reaches stderr escaped"
else not_ok "a sandbox-chosen file name in a store error reaches stderr escaped" "exit $RC: $(od -c "$T/err" | head -4 | tr '\n' ' ')"; fi
store_fail_run plain-name
if grep -q '^runbox: .*harvest `plain-name`: create .*: Not a directory$' "$T/err"; then ok "control: the same store error with a plain name is unchanged"
else not_ok "control: the same store error with a plain name is unchanged" "exit $RC: $(first_line "$ERR")"; fi

# A closed stdout never abandons a run: `runbox run -- yes | head -1` ends as a pipeline does
# (the step meets its closed stdout: SIGPIPE), recorded in the ledger, nothing left behind; so
# with -v and stderr into the pipe too, and with --json printed into a pipe already closed.
run_ends() { run_rbx ledger query --type run_end --json; rj "len(r)" 2>/dev/null || echo 0; }
leftovers() { # ID: what of run ID is left: its state file, run dir, cgroups
	find "$STATE/run" -maxdepth 1 -name "$1*" 2>/dev/null
	find /sys/fs/cgroup -maxdepth 8 -type d -name "$1" 2>/dev/null
}
# closed_stdout NAME HEAD-ARGS -- RUN-ARGS...: the run's output piped into `head HEAD-ARGS`;
# sets st to the step's end ("failure 13": the signal that ended it).
closed_stdout() {
	local name=$1 hargs=$2
	shift 3
	local before
	before=$(run_ends)
	rbx_cmd run --image minimal "$@"
	timeout -k 5 60 "${RBX_CMD[@]}" </dev/null 2>&1 | head $hargs >"$T/head.out"
	local rcs=("${PIPESTATUS[@]}")
	local after id
	after=$(run_ends)
	run_rbx ledger query --type step_end --json
	id=$(rj "r[-1]['run_id']")
	st=$(rj "r[-1]['data']['status'] + ' ' + str(r[-1]['data'].get('signal'))")
	if [ "${rcs[0]}" = 124 ] || [ "${rcs[0]}" = 137 ]; then not_ok "$name" "runbox hung (timeout exit ${rcs[0]})"
	elif [ "${rcs[1]}" != 0 ] || { [ "$hargs" = -1 ] && [ ! -s "$T/head.out" ]; }; then not_ok "$name" "head exit ${rcs[1]}, read '$(cat "$T/head.out")'"
	elif [ "$after" != $((before + 1)) ]; then not_ok "$name" "the run's end is not in the ledger ($before -> $after run_end events; runbox exit ${rcs[0]})"
	elif [ -n "$(leftovers "$id")" ]; then not_ok "$name" "left: $(leftovers "$id" | tr '\n' ' ')"
	else ok "$name (runbox exit ${rcs[0]}, step $st)"; fi
}
closed_stdout "runbox run -- yes | head -1: the run ends recorded, nothing left" -1 -- -- yes
if [ "$st" = "failure 13" ]; then ok "the step met its closed stdout as in a pipeline (SIGPIPE)"
else not_ok "the step met its closed stdout as in a pipeline (SIGPIPE)" "step_end: $st"; fi
closed_stdout "runbox run -v -- yes 2>&1 | head -1: the run ends recorded, nothing left" -1 -- -v -- yes
closed_stdout "runbox run --json into a closed pipe: the run ends recorded, nothing left" -c0 -- --json -- sh -c 'sleep 0.2; echo hi'
# Control: a run whose stdout stays open prints all of its output.
sb -- sh -c 'yes | head -3'
if [ "$RC" = 0 ] && [ "$OUT" = $'y\ny\ny' ]; then ok "control: with stdout open the step's output is all there"
else not_ok "control: with stdout open the step's output is all there" "exit $RC: $OUT"; fi

# gc finds whatever a run left, wherever runbox was killed: here as it opens the sandbox's control
# socket (its second socketpair: the first is its factory's, made first thing in main), after its
# run directory and cgroups exist and before the sandbox does. Before the
# kill the state file names them; gc removes them and records the run as abandoned.
if [ "$MODE" = subids ]; then
	note "gc after a kill at the sandbox's control socket: root and user modes (subids' wrapper forks itself)"
elif ! command -v strace >/dev/null; then not_ok "gc cleans up after a runbox killed during setup" "strace missing (scripts/install-deps.sh test)"
else
	rbx_cmd run --image minimal -- true
	before=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	# Through sh, so the kill is reported there, not by this shell.
	krc=$(sh -c '"$@" </dev/null >/dev/null 2>&1; echo $?' sh \
		strace -f -qq -o /dev/null -e trace=socketpair -e inject=socketpair:signal=SIGKILL:when=2 "${RBX_CMD[@]}")
	id=$(find "$STATE/run" -maxdepth 1 -name '*.state' | head -1 | xargs -r basename | sed 's/\.state$//')
	dir_left=$(find "$STATE/run" -mindepth 1 -maxdepth 1 -type d | wc -l)
	cg_left=$( [ -n "$id" ] && find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" | wc -l)
	# Every cgroup of the run that exists is named in its state file (as root there are some;
	# rootless here, none can be made).
	listed=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["cgroups"]))' "$STATE/run/$id.state" 2>/dev/null)
	if [ -n "$id" ] && [ "$dir_left" = 1 ] && [ "${listed:-x}" = "${cg_left:-0}" ] && { [ "$MODE" != root ] || [ "$listed" -gt 0 ]; }; then
		ok "a runbox killed during setup leaves a state file naming its run dir and cgroups"
	else not_ok "a runbox killed during setup leaves a state file naming its run dir and cgroups" "exit $krc, id '$id', dirs $dir_left, cgroups ${cg_left:-0} (${listed:-?} listed)"; fi
	run_rbx gc
	after=$(find "$STATE/run" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
	cg_after=$( [ -n "$id" ] && find /sys/fs/cgroup -maxdepth 8 -type d -name "$id" | wc -l)
	if [ -n "$id" ] && [ "$RC" = 0 ] && grep -q "$id: cleaned up, recorded as abandoned" <<<"$OUT" && [ "$after" = 0 ] && [ "${cg_after:-0}" = 0 ]; then
		ok "gc removes the run dir and cgroups of a runbox killed during setup, records it abandoned"
	else not_ok "gc removes the run dir and cgroups of a runbox killed during setup, records it abandoned" "gc exit $RC: $(first_line "$OUT$ERR"); $after entries, ${cg_after:-?} cgroups left"; fi
fi

# Text mode says what the JSON result would: one stderr line per requested limit that was not
# enforced, and one for an OOM kill. Memory is enforced as root here (cgroup v1 or v2) and not
# rootless (no writable cgroup for uid 65534): each mode checks the line where it belongs and
# its absence where it does not (the other mode's run is the control).
not_enforced_lines() { grep -c '^runbox: warning: the memory limit (67108864 bytes) was not enforced: ' <<<"$ERR"; }
# stderr without the run id line every text-mode run starts with.
err_beyond_id() { grep -v '^runbox: run [0-9a-f]*$' <<<"$ERR"; }
sb --memory 64M -- /bin/probe exit 0
n=$(not_enforced_lines)
if [ "$MODE" = root ]; then
	if [ "$RC" = 0 ] && [ "$n" = 0 ] && [ -z "$(err_beyond_id)" ]; then ok "root: an enforced --memory says nothing on stderr but its run id"
	else not_ok "root: an enforced --memory says nothing on stderr" "exit $RC: $(first_line "$ERR")"; fi
else
	# The policy's own pids and cpus limits are not enforced either: one line each, no more.
	all=$(err_beyond_id | grep -c '') limits=$(grep -o '^runbox: warning: the [a-z_]* limit' <<<"$ERR" | sort -u | wc -l)
	if [ "$RC" = 0 ] && [ "$n" = 1 ] && [ "$all" = "$limits" ]; then ok "rootless: an unenforced --memory is one line on stderr (of $all, one per limit)"
	else not_ok "rootless: an unenforced --memory is one line on stderr" "exit $RC, $n memory lines, $all lines for $limits limits: $(first_line "$ERR")"; fi
fi
# limits.require_enforced fails the run (125, naming the limit) where memory cannot be enforced,
# and changes nothing where it can; control: the same run with the switch off.
policy_variant default "$T/scratch/enforced.json" enforced "p.setdefault('limits', {})['require_enforced'] = True"
sb --policy "$T/scratch/enforced.json" --memory 64M -- /bin/probe exit 0
if [ "$MODE" = root ]; then
	if [ "$RC" = 0 ]; then ok "root: limits.require_enforced runs where memory is enforced"
	else not_ok "root: limits.require_enforced runs where memory is enforced" "exit $RC: $(first_line "$ERR")"; fi
else
	if [ "$RC" = 125 ] && grep -q 'require_enforced.*memory limit cannot be enforced' <<<"$ERR"; then
		ok "rootless: limits.require_enforced fails the run (125) when memory cannot be enforced"
	else not_ok "rootless: limits.require_enforced fails the run (125) when memory cannot be enforced" "exit $RC: $(first_line "$ERR")"; fi
	sb --memory 64M -- /bin/probe exit 0
	if [ "$RC" = 0 ]; then ok "control: without require_enforced the same run goes on"
	else not_ok "control: without require_enforced the same run goes on" "exit $RC: $(first_line "$ERR")"; fi
fi
policy_variant default "$T/scratch/badswitch.json" badswitch "p.setdefault('limits', {})['require_enforced'] = 'yes'"
run_rbx policy validate "$T/scratch/badswitch.json"
if [ "$RC" = 125 ] && grep -q 'limits.require_enforced' <<<"$ERR"; then ok "limits.require_enforced must be true or false"
else not_ok "limits.require_enforced must be true or false" "exit $RC: $(first_line "$ERR")"; fi
# An OOM kill as root is one line on stderr (exit 137); control: a step under the limit, none.
if [ "$MODE" = root ]; then
	sb --memory 64M -- /bin/sh -c '/bin/probe alloc 256; exit $?'
	if [ "$RC" = 137 ] && [ "$(grep -c 'OOM killer killed the step' <<<"$ERR")" = 1 ]; then ok "an OOM kill is one line on stderr"
	else not_ok "an OOM kill is one line on stderr" "exit $RC: $(first_line "$ERR")"; fi
	sb --memory 64M -- /bin/sh -c '/bin/probe alloc 16; exit $?'
	if [ "$RC" = 0 ] && [ -z "$(err_beyond_id)" ]; then ok "control: a step under the memory limit says nothing but its run id"
	else not_ok "control: a step under the memory limit says nothing" "exit $RC: $(first_line "$ERR")"; fi
fi
# A seccomp kill (the x32 entry is killed with SIGSYS) is one line on stderr; control: the same
# probe's ordinary getpid, none.
sb -- /bin/probe x32-getpid
if [ "$RC" = 159 ] && [ "$(grep -c 'seccomp killed the step' <<<"$ERR")" = 1 ]; then ok "a seccomp kill is one line on stderr"
else not_ok "a seccomp kill is one line on stderr" "exit $RC: $(first_line "$ERR")"; fi
sb -- /bin/probe exit 0
if [ "$RC" = 0 ] && ! grep -q 'seccomp killed' <<<"$ERR"; then ok "control: an ordinary step has no seccomp line"
else not_ok "control: an ordinary step has no seccomp line" "exit $RC: $(first_line "$ERR")"; fi

# --pids takes digits only, 1 to 2^32 - 1 (the policy's range): "-5" was read as 2^64 - 5 and
# reached the kernel's pids.max. Control: --pids 64 runs.
for v in -5 0 4294967296 5x; do
	sb --pids "$v" -- /bin/probe exit 0
	if [ "$RC" = 125 ] && grep -q -- "--pids \`$v\`: expected a number" <<<"$ERR" && [ "$(grep -c '' <<<"$ERR")" = 1 ]; then ok "--pids $v is refused as bad input"
	else not_ok "--pids $v is refused as bad input" "exit $RC: $(first_line "$ERR")"; fi
done
sb --pids 64 -- /bin/probe exit 0
if [ "$RC" = 0 ]; then ok "control: --pids 64 runs"; else not_ok "control: --pids 64 runs" "exit $RC: $(first_line "$ERR")"; fi

# ledger's readable verify output shows a reason's text escaped (here a state directory named
# with an escape, in "the head file ... is missing"); control: the same with a plain name.
for name in $'esc\e[31m' plain; do
	d=$T/$name
	mkdir -p "$d"
	[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$d"
	run_rbx run --state-dir "$d" --image minimal -- /bin/probe exit 0
	rm -f "$d/ledger.head"
	run_rbx ledger --state-dir "$d" verify
	if [ "$name" = plain ]; then
		if [ "$RC" = 1 ] && grep -qF "ledger BROKEN: the head file \`$d/ledger.head\` is missing" <<<"$OUT"; then ok "control: verify's reason with a plain path is as it is"
		else not_ok "control: verify's reason with a plain path is as it is" "exit $RC: $(first_line "$OUT$ERR")"; fi
	elif [ "$RC" = 1 ] && grep -qF 'esc\x1b[31m/ledger.head' <<<"$OUT" && ! grep -q $'\e' <<<"$OUT"; then ok "verify shows its reason's text escaped"
	else not_ok "verify shows its reason's text escaped" "exit $RC: $(od -c <<<"$OUT" | head -3 | tr '\n' ' ')"; fi
done
# A reader that stops early (`ledger query | head -1`) is no failure: exit 0, nothing on stderr.
# The reader here closes the pipe before runbox writes: every write meets EPIPE.
rbx_cmd ledger query
"${RBX_CMD[@]}" </dev/null 2>"$T/err" | sh -c 'exec 0<&-; sleep 1'
rcs=("${PIPESTATUS[@]}")
if [ "${rcs[0]}" = 0 ] && [ ! -s "$T/err" ]; then ok "ledger query into a closed pipe exits 0, quietly"
else not_ok "ledger query into a closed pipe exits 0, quietly" "exit ${rcs[0]}: $(head -c 200 "$T/err")"; fi

# Two inputs at one destination, or one inside the other's, are refused before the run (125,
# naming both), not met inside the sandbox as "Permission denied". Control: neighbours (x and
# xy) both arrive.
mkdir -p "$T/scratch/in" && echo a >"$T/scratch/in/a" && echo b >"$T/scratch/in/b" && chmod -R a+rX "$T/scratch/in"
pol_in="$T/scratch/inputs.json"
policy_variant default "$pol_in" inputs "p.setdefault('inputs', {})['allow'] = ['$T/scratch/in']"
sb --policy "$pol_in" --input "$T/scratch/in/a:/workspace/in/x" --input "$T/scratch/in/b:/workspace/in/x" -- /bin/cat /workspace/in/x
if [ "$RC" = 125 ] && grep -qF "\`$T/scratch/in/a:/workspace/in/x\` and --input \`$T/scratch/in/b:/workspace/in/x\`: both go to /workspace/in/x" <<<"$ERR"; then
	ok "two inputs at one destination are refused, naming both"
else not_ok "two inputs at one destination are refused, naming both" "exit $RC: $(first_line "$ERR")"; fi
sb --policy "$pol_in" --input "$T/scratch/in:/workspace/in/d" --input "$T/scratch/in/a:/workspace/in/d/a" -- /bin/true
if [ "$RC" = 125 ] && grep -qF "/workspace/in/d and /workspace/in/d/a: one lies inside the other" <<<"$ERR"; then ok "an input inside another input is refused"
else not_ok "an input inside another input is refused" "exit $RC: $(first_line "$ERR")"; fi
sb --policy "$pol_in" --input "$T/scratch/in/a:/workspace/in/x" --input "$T/scratch/in/b:/workspace/in/xy" -- /bin/cat /workspace/in/x /workspace/in/xy
if [ "$RC" = 0 ] && [ "$OUT" = $'a\nb' ]; then ok "control: inputs at neighbouring destinations both arrive"
else not_ok "control: inputs at neighbouring destinations both arrive" "exit $RC: $(first_line "$OUT$ERR")"; fi

# A host path holding `:` is an input like any other: given whole to --input, with a DEST after
# its last `:/workspace/in/`, and as a manifest's inputs[].from (a struct end to end, never a
# "from:to" string). Control: the part before the colon is another file, which must not arrive.
echo wrong >"$T/scratch/in/c" && echo right >"$T/scratch/in/c:d" && chmod a+r "$T/scratch/in/c" "$T/scratch/in/c:d"
sb --policy "$pol_in" --input "$T/scratch/in/c:d" -- /bin/cat "/workspace/in/c:d"
if [ "$RC" = 0 ] && [ "$OUT" = right ]; then ok "--input of a host path holding a colon binds that path"
else not_ok "--input of a host path holding a colon binds that path" "exit $RC: $(first_line "$OUT$ERR")"; fi
sb --policy "$pol_in" --input "$T/scratch/in/c:d:/workspace/in/y" -- /bin/cat /workspace/in/y
if [ "$RC" = 0 ] && [ "$OUT" = right ]; then ok "--input COLON:PATH:/workspace/in/DEST splits at the destination"
else not_ok "--input COLON:PATH:/workspace/in/DEST splits at the destination" "exit $RC: $(first_line "$OUT$ERR")"; fi
sb --policy "$pol_in" --input "$T/scratch/in/c:/workspace/in/y" -- /bin/cat /workspace/in/y
if [ "$RC" = 0 ] && [ "$OUT" = wrong ]; then ok "control: --input SRC:/workspace/in/DEST binds SRC"
else not_ok "control: --input SRC:/workspace/in/DEST binds SRC" "exit $RC: $(first_line "$OUT$ERR")"; fi
printf '{"tenant": "t-colon", "agent": "a-colon", "inputs": [{"from": "%s", "to": "/workspace/in/z"}], "steps": [{"script": "cat /workspace/in/z"}]}\n' \
	"$T/scratch/in/c:d" >"$T/scratch/colon.json"
run_rbx run --image minimal --json "$T/scratch/colon.json"
if [ "$RC" = 0 ] && grep -qF '"stdout": "right\n"' <<<"$OUT"; then ok "a manifest input whose host path holds a colon arrives"
else not_ok "a manifest input whose host path holds a colon arrives" "exit $RC: $(first_line "$ERR") $(grep -m1 stdout <<<"$OUT")"; fi
