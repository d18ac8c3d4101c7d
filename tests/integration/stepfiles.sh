#!/usr/bin/env bash
# A step's script and a skill's inputs reach it from the runner, never through the sandbox's
# own tree: a FIFO planted where init used to write the next step's script cannot stall the
# run past its timeouts, and a background process that swaps files in /workspace/.runbox
# cannot change what the next step runs or reads. Each check has a control showing the
# attack was really in place.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init stepfiles

FIX=$ROOT/tests/integration/fixtures/stepfiles

# manifest OUT RUN_ID JSON-STEPS [EXTRA-TOP-LEVEL-JSON]: writes a strict-policy manifest.
manifest() {
	"$PY" - "$@" <<'EOF'
import json, sys
out, run_id, steps = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
m = {"tenant": "acme", "agent": "stepfiles", "run_id": run_id, "image": "minimal",
     "policy": "strict", "steps": steps}
if len(sys.argv) > 4:
    m.update(json.loads(sys.argv[4]))
json.dump(m, open(out, "w"), indent=1)
EOF
}

# leftovers NAME RUN_ID MARKER: nothing of the run remains: no process with MARKER, no runbox
# process of ours, no run directory or state file, no cgroup named after the run.
leftovers() {
	local name=$1 id=$2 mark=$3 left="" p
	if ! wait_for no_marker "$mark"; then
		not_ok "$name: no process left" "still running: $(pids_with "$mark" | tr '\n' ' ')"
		for p in $(pids_with "$mark"); do kill -9 "$p"; done
	else ok "$name: no process left"; fi
	for p in /proc/[0-9]*; do
		grep -qsaF "RUNBOX_STATE_DIR=$STATE" "$p/environ" && left="$left ${p#/proc/}"
	done
	if [ -z "$left" ]; then ok "$name: no runbox process left"
	else not_ok "$name: no runbox process left" "pids$left"; fi
	local dirs
	dirs=$(find "$STATE" "$T/xdg" -name "*$id*" 2>/dev/null | grep -v -e '/artifacts/' -e '/ledger' -e '/results/' | head -n 3)
	if [ -z "$dirs" ]; then ok "$name: no run directory or state file left"
	else not_ok "$name: no run directory or state file left" "$(echo $dirs)"; fi
	local cg
	cg=$(find /sys/fs/cgroup -mindepth 1 -type d -name "*$id*" 2>/dev/null | head -n 3)
	if [ -z "$cg" ]; then ok "$name: no cgroup left"
	else not_ok "$name: no cgroup left" "$(echo $cg)"; fi
}

# ---------------------------------------------------------------------------------------
# 1. Step 1 moves /workspace/.runbox away, makes its own and plants a FIFO at step-2.sh, and
# leaves a sleeper behind. Init once blocked opening that FIFO while the runner waited for
# `started` with no deadline: neither timeout fired. Now step 2 runs its declared text and
# times out (124) within its 2 s; the run ends, killing the sleeper.
M=$(new_marker)
ID=fifo$$r$RANDOM
plant="mv /workspace/.runbox /workspace/old-runbox 2>/dev/null
mkdir -p /workspace/.runbox
mkfifo /workspace/.runbox/step-2.sh
test -p /workspace/.runbox/step-2.sh && echo FIFO-PLANTED
/bin/probe sleep-forever $M >/dev/null 2>&1 &"
after="test -p /workspace/.runbox/step-2.sh && echo FIFO-STILL-THERE
echo DECLARED-$M
sleep 30"
manifest "$T/fifo.json" "$ID" "$("$PY" -c 'import json,sys; print(json.dumps([
	{"name": "plant", "timeout": "2s", "script": sys.argv[1]},
	{"name": "after", "timeout": "2s", "script": sys.argv[2]}]))' "$plant" "$after")" \
	'{"limits": {"timeout": "3s"}}'
run_manifest "$T/fifo.json" 20 KILL
if [ "$RC" = 137 ] && [ -z "$OUT" ]; then
	not_ok "fifo plant: runbox ends within the timeouts" "still running after 20 s (killed)"
elif [ "$RC" = 124 ]; then ok "fifo plant: runbox ends within the timeouts, exit 124"
else not_ok "fifo plant: runbox ends within the timeouts, exit 124" "exit $RC: $(first_line "$ERR")"; fi
check "fifo plant control: step 1 really planted the FIFO" \
	'"FIFO-PLANTED" in r["steps"][0]["stdout"] and r["steps"][0]["status"] == "success"' \
	'"step 1: %s %r" % (r["steps"][0]["status"], r["steps"][0]["stdout"])'
check "fifo plant: step 2 timed out, the run is timed_out" \
	'len(r["steps"]) == 2 and r["steps"][1]["timed_out"] and r["steps"][1]["exit"] == 124 and r["result"] == "timed_out"' \
	'"%d steps, step 2 %s exit %s, run %s" % (len(r["steps"]), r["steps"][-1]["status"], r["steps"][-1]["exit"], r["result"])'
check "fifo plant: step 2 ran its declared text beside the FIFO" \
	'r["steps"][1]["stdout"] == "FIFO-STILL-THERE\nDECLARED-'"$M"'\n"' 'repr(r["steps"][1]["stdout"])'
leftovers "fifo plant" "$ID" "$M"
run_rbx gc # after a failure above: what a killed runbox left

# ---------------------------------------------------------------------------------------
# 2. Step 1 leaves two watchers (inotify) that keep their own bytes at
# /workspace/.runbox/step-2.sh and inputs.json, where init once wrote the next step's files,
# renaming a copy over anything else written there. Step 2 must still print its declared
# marker, and the skill step read its declared inputs; the controls show the planted files
# were in place when those steps ran.
M=$(new_marker)
ID=swap$$r$RANDOM
plant="mv /workspace/.runbox /workspace/old-runbox 2>/dev/null
mkdir -p /workspace/.runbox
printf '#!/bin/sh\necho EVIL-$M\n' >/workspace/evil.sh
printf '{\"word\":\"evil-$M\"}' >/workspace/evil.json
/bin/probe swap-watch /workspace/.runbox step-2.sh /workspace/evil.sh $M >/tmp/swap-script.log 2>&1 &
/bin/probe swap-watch /workspace/.runbox inputs.json /workspace/evil.json $M >/tmp/swap-inputs.log 2>&1 &
i=0
until grep -qs EVIL-$M /workspace/.runbox/step-2.sh && grep -qs evil-$M /workspace/.runbox/inputs.json; do
	i=\$((i + 1)); [ \$i -lt 100 ] || exit 1; sleep 0.1
done
echo WATCHERS-READY"
declared="echo DECLARED-$M
grep -qs EVIL-$M /workspace/.runbox/step-2.sh && echo SCRIPT-SWAP-IN-PLACE
if printf 'echo EVIL-$M\\n' >>/proc/self/fd/3; then echo SCRIPT-WRITABLE; else echo SCRIPT-SEALED; fi
printf x >>/tmp/ctl && echo CONTROL-WRITABLE
:"
control="grep -qs evil-$M /workspace/.runbox/inputs.json && echo INPUTS-SWAP-IN-PLACE
cat /tmp/swap-script.log /tmp/swap-inputs.log | grep -c swapped"
manifest "$T/swap.json" "$ID" "$("$PY" -c 'import json,sys; print(json.dumps([
	{"name": "plant", "script": sys.argv[1]},
	{"name": "declared", "script": sys.argv[2]},
	{"name": "inputs", "skill": "show-inputs", "inputs": {"word": "declared-" + sys.argv[4]}},
	{"name": "control", "script": sys.argv[3]}]))' "$plant" "$declared" "$control" "$M")" \
	"{\"skills\": [\"$FIX/skills/show-inputs\"], \"limits\": {\"timeout\": \"20s\"}}"
run_manifest "$T/swap.json" 60 KILL
check "swap control: step 1 left the watchers in place" \
	'"WATCHERS-READY" in r["steps"][0]["stdout"]' '"step 1: %s %r %r" % (r["steps"][0]["status"], r["steps"][0]["stdout"], r["steps"][0]["stderr"])'
check "swap: step 2 ran its declared text, not the planted one" \
	'len(r["steps"]) > 1 and r["steps"][1]["stdout"].startswith("DECLARED-'"$M"'\n") and "EVIL" not in r["steps"][1]["stdout"]' \
	'repr(r["steps"][1]["stdout"])'
check "swap control: the planted script was at step-2.sh while step 2 ran" \
	'"SCRIPT-SWAP-IN-PLACE" in r["steps"][1]["stdout"]' 'repr(r["steps"][1]["stdout"])'
check "swap: a step cannot append to its own script (sealed); control: a plain file takes it" \
	'"SCRIPT-SEALED\nCONTROL-WRITABLE\n" in r["steps"][1]["stdout"]' 'repr(r["steps"][1]["stdout"])'
check "swap: the skill read its declared inputs through RUNBOX_INPUTS_FILE" \
	'r["steps"][2]["result"]["inputs"] == {"word": "declared-'"$M"'"}' \
	'"%s: result %r error %r stderr %r" % (r["steps"][2]["status"], r["steps"][2].get("result"), r["steps"][2].get("error"), r["steps"][2]["stderr"])'
check "swap: RUNBOX_INPUTS_FILE is not a path in the workspace" \
	'not r["steps"][2]["result"]["file"].startswith("/workspace")' 'r["steps"][2]["result"]["file"]'
check "swap control: the planted inputs were at inputs.json, the watchers running" \
	'r["steps"][3]["stdout"].startswith("INPUTS-SWAP-IN-PLACE\n") and int(r["steps"][3]["stdout"].split()[-1]) >= 2' \
	'repr(r["steps"][3]["stdout"])'
check "swap: the run succeeds" 'r["result"] == "success" and r["exit"] == 0' '"%s exit %s" % (r["result"], r["exit"])'
# The ledger records step 2's declared text, which is what ran.
run_rbx ledger show "$ID" --json
if "$PY" - "$T/out" "$declared" <<'EOF'; then ok "swap: the ledger records step 2's declared text"
import json, sys
ev = [e for e in json.load(open(sys.argv[1])) if e["type"] == "step_start" and e["data"]["step"] == 2]
sys.exit(0 if len(ev) == 1 and ev[0]["data"]["text"] == sys.argv[2] else 1)
EOF
else not_ok "swap: the ledger records step 2's declared text" "exit $RC: $(first_line "$OUT$ERR")"; fi
leftovers "swap" "$ID" "$M"
run_rbx gc
