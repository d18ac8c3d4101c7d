#!/usr/bin/env bash
# Who may say what (SPEC): command-line options beside a manifest are ceilings; a manifest names
# policies by name unless the operator allows paths; env.pass widens only from the operator's
# policy; absent limits are safe defaults and "unlimited" is written out; and the small
# validation bugs of issue 13 (unit-less durations, negative numbers, duplicate inputs,
# messages naming a --input never typed). Each check has a control.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init trust

S=$T/scratch
CFG=$T/cfg
mkdir -p "$CFG/policies"
chmod -R a+rX "$S" "$CFG"

# put FILE TEXT: a file every mode's user can read.
put() {
	printf '%s\n' "$2" >"$1"
	chmod a+r "$1"
}
# manifest FILE EXTRA STEP-SCRIPT: a one-step manifest with EXTRA top-level keys ("" for none).
manifest() {
	put "$1" "{\"tenant\": \"t\", \"agent\": \"a\", \"image\": \"minimal\", $2 \"steps\": [{\"script\": \"$3\"}]}"
}
err_has() { grep -qF -- "$1" <<<"$ERR"; }

# ---------------------------------------------------------------------------------------
# 1. The review's repro: --policy strict --net none --timeout 1s --memory 64M beside a manifest
# that names `default` and asks for more. It must fail, naming both values.
manifest "$S/repro.json" '"policy": "default", "limits": {"timeout": "10s", "memory": "256M"},' 'echo ran'
run_rbx run --policy strict --net none --timeout 1s --memory 64M "$S/repro.json" --json
if [ "$RC" = 125 ] && err_has '`default` is not --policy `strict`'; then ok "repro: a manifest naming another policy than --policy fails, naming both"
else not_ok "repro: a manifest naming another policy than --policy fails, naming both" "exit $RC: $(first_line "$ERR$OUT")"; fi
manifest "$S/repro-limits.json" '"limits": {"timeout": "10s", "memory": "256M"},' 'echo ran'
run_rbx run --policy strict --net none --timeout 1s --memory 64M "$S/repro-limits.json" --json
if [ "$RC" = 125 ] && err_has 'limits.timeout: 10s is above --timeout 1s'; then ok "repro: a manifest timeout above --timeout fails, naming both"
else not_ok "repro: a manifest timeout above --timeout fails, naming both" "exit $RC: $(first_line "$ERR$OUT")"; fi
manifest "$S/repro-mem.json" '"limits": {"memory": "256M"},' 'echo ran'
run_rbx run --policy strict --memory 64M "$S/repro-mem.json" --json
if [ "$RC" = 125 ] && err_has 'limits.memory: 256M is above --memory 64M'; then ok "repro: a manifest memory above --memory fails, naming both"
else not_ok "repro: a manifest memory above --memory fails, naming both" "exit $RC: $(first_line "$ERR$OUT")"; fi

# Control: values under the ceilings run, with them, under the command line's policy and net.
manifest "$S/under.json" '"limits": {"timeout": "900ms", "memory": "32M"},' 'env | grep -c ^RUNBOX_TOKEN= ; echo ran'
run_rbx run --policy strict --net none --timeout 1s --memory 64M "$S/under.json" --json
check "control: values under the ceilings run with them (strict, 900 ms, 32M, no network, no token)" \
	'r["result"] == "success" and r["policy"]["name"] == "strict" and r["limits"]["timeout_ms"] == 900 and r["limits"]["memory_bytes"] == 32 << 20 and r["limits"]["network"] == "none" and r["steps"][0]["stdout"] == "0\nran\n"' \
	'"exit %s, policy %s, limits %s, stdout %r" % (r["exit"], r["policy"]["name"], r["limits"], r["steps"][0]["stdout"])'
# A manifest that names no limit gets the ceiling: a step longer than --timeout is killed.
manifest "$S/long.json" '' 'sleep 5; echo late'
run_rbx run --policy strict --timeout 1s "$S/long.json" --json
check "a manifest naming no timeout gets --timeout: a 5 s step is killed at 1 s" \
	'r["limits"]["timeout_ms"] == 1000 and r["steps"][0]["timed_out"] and "late" not in r["steps"][0]["stdout"]' \
	'"exit %s, limits %s, step %s" % (r["exit"], r.get("limits"), r["steps"][0].get("status"))'
run_rbx run --policy strict --timeout 10s "$S/long.json" --json
check "control: the same step under --timeout 10s finishes" \
	'r["result"] == "success" and r["steps"][0]["stdout"] == "late\n"' '"exit %s, stdout %r" % (r["exit"], r["steps"][0]["stdout"])'
# The tenant the caller runs a manifest for: a manifest (often an agent's) may not pick another,
# as the artifact store's tenant boundary rests on it. Control: the same tenant runs.
manifest "$S/tenant.json" '' 'echo ran'
run_rbx run --tenant other "$S/tenant.json" --json
if [ "$RC" = 125 ] && err_has 'tenant: `t` is not --tenant `other`'; then ok "a manifest for another tenant than --tenant fails, naming both"
else not_ok "a manifest for another tenant than --tenant fails, naming both" "exit $RC: $(first_line "$ERR$OUT")"; fi
run_rbx run --agent b "$S/tenant.json" --json
if [ "$RC" = 125 ] && err_has 'agent: `a` is not --agent `b`'; then ok "a manifest for another agent than --agent fails, naming both"
else not_ok "a manifest for another agent than --agent fails, naming both" "exit $RC: $(first_line "$ERR$OUT")"; fi
run_rbx run --tenant t --agent a "$S/tenant.json" --json
check "control: --tenant and --agent that match the manifest run it" 'r["result"] == "success" and r["tenant"] == "t"' '"exit %s" % r.get("exit")'
# An ad-hoc run is recorded under the --tenant and --agent given; a malformed id is refused.
run_rbx run --image minimal --tenant acme --agent bot-1 -- true
run_rbx ledger query --tenant acme --agent bot-1 --type run_start --json
if [ "$(rj 'len(r)' 2>/dev/null)" = 1 ]; then ok "--tenant and --agent label an ad-hoc run in the ledger"
else not_ok "--tenant and --agent label an ad-hoc run in the ledger" "$(first_line "$OUT$ERR")"; fi
run_rbx ledger query --tenant local --agent bot-1 --type run_start --json
if [ "$(rj 'len(r)' 2>/dev/null)" = 0 ]; then ok "control: the run is not under the default tenant"
else not_ok "control: the run is not under the default tenant" "$(first_line "$OUT$ERR")"; fi
run_rbx run --image minimal --tenant ../x -- true
if [ "$RC" = 125 ] && err_has '--tenant `../x`: expected an id'; then ok "a malformed --tenant is refused"
else not_ok "a malformed --tenant is refused" "exit $RC: $(first_line "$ERR")"; fi

# The command line narrows the policy too: it never widens it.
run_rbx run --image minimal --policy strict --net gateway -- true
if [ "$RC" = 125 ] && err_has 'policy `strict` has network mode none'; then ok "--net gateway under a policy with network none fails"
else not_ok "--net gateway under a policy with network none fails" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image minimal --policy strict --timeout 6m -- true
if [ "$RC" = 125 ] && err_has "above policy \`strict\`'s limits.timeout (5m)"; then ok "--timeout above the policy's fails, naming both"
else not_ok "--timeout above the policy's fails, naming both" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image minimal --policy strict --timeout 5m --net none -- true
if [ "$RC" = 0 ]; then ok "control: --timeout at the policy's and --net none run"
else not_ok "control: --timeout at the policy's and --net none run" "exit $RC: $(first_line "$ERR")"; fi

# ---------------------------------------------------------------------------------------
# 2. Policies by name only; env.pass from the operator's policy alone.
put "$S/mine.json" '{"name": "mine", "network": {"mode": "none"}, "env": {"pass": ["RBX_HOST_VAR"]}}'
cp "$S/mine.json" "$CFG/policies/mine.json"
chmod a+r "$CFG/policies/mine.json"
RBX_ENV=("RUNBOX_CONFIG_DIR=$CFG" "RBX_HOST_VAR=from-the-host")
manifest "$S/by-path.json" '"policy": "mine.json",' 'echo V=$RBX_HOST_VAR'
run_rbx run "$S/by-path.json" --json
if [ "$RC" = 125 ] && err_has 'policy: `'"$S"'/mine.json` is a path' && ! grep -q from-the-host <<<"$OUT"; then
	ok "a manifest naming a policy by path fails (its env.pass never applies)"
else not_ok "a manifest naming a policy by path fails" "exit $RC: $(first_line "$ERR$OUT")"; fi
manifest "$S/by-name.json" '"policy": "mine",' 'echo V=$RBX_HOST_VAR'
run_rbx run "$S/by-name.json" --json
check "control: by name from the operator's config dir it runs, and that policy's env.pass passes the variable" \
	'r["result"] == "success" and r["policy"]["name"] == "mine" and r["steps"][0]["stdout"] == "V=from-the-host\n"' \
	'"exit %s, policy %s, stdout %r" % (r["exit"], r["policy"]["name"], r["steps"][0]["stdout"])'
# Control of the control: the manifest's own env sets values, it never passes host ones.
manifest "$S/no-pass.json" '"policy": "strict",' 'echo V=$RBX_HOST_VAR'
run_rbx run "$S/no-pass.json" --json
check "control: under a policy without that env.pass the variable does not get in" \
	'r["result"] == "success" and r["steps"][0]["stdout"] == "V=\n"' '"stdout %r" % r["steps"][0]["stdout"]'
put "$CFG/config.json" '{"manifest_policy_paths": true}'
run_rbx run "$S/by-path.json" --json
check "with the operator's config.json allowing paths, the manifest's policy path runs" \
	'r["result"] == "success" and r["policy"]["name"] == "mine"' '"exit %s: %s" % (r["exit"], r.get("error"))'
put "$CFG/config.json" '{"manifest_policy_paths": "yes"}'
run_rbx run "$S/by-path.json" --json
if [ "$RC" = 125 ] && err_has 'manifest_policy_paths: expected true or false'; then ok "a config.json with a wrong type is refused, naming the key"
else not_ok "a config.json with a wrong type is refused, naming the key" "exit $RC: $(first_line "$ERR")"; fi
rm -f "$CFG/config.json"
# The command line's --policy PATH stays allowed: whoever types it owns their config dir too.
run_rbx run --policy "$S/mine.json" "$S/no-pass.json" --json
if [ "$RC" = 125 ] && err_has '`strict` is not --policy'; then ok "--policy PATH beside a manifest naming another policy fails"
else not_ok "--policy PATH beside a manifest naming another policy fails" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --policy "$S/mine.json" "$S/long.json" --json
check "control: --policy PATH beside a manifest naming none runs under it" \
	'r["policy"]["name"] == "mine"' '"exit %s: %s" % (r["exit"], r.get("error"))'
RBX_ENV=()

# ---------------------------------------------------------------------------------------
# 3. Absent limits are safe defaults; "unlimited" is written out and validate says so.
put "$CFG/policies/bare.json" '{"name": "bare"}'
put "$CFG/policies/open.json" '{"name": "open", "limits": {"timeout": "unlimited", "memory": "unlimited", "pids": "unlimited", "cpus": "unlimited"}}'
RBX_ENV=("RUNBOX_CONFIG_DIR=$CFG")
manifest "$S/bare.json" '"policy": "bare",' 'echo ok'
run_rbx run "$S/bare.json" --json
check "a policy naming no limits gets the default timeout, memory and pids (30m, 1G, 1024)" \
	'r["limits"]["timeout_ms"] == 1800000 and r["limits"]["memory_bytes"] == 1 << 30 and r["limits"]["pids"] == 1024 and r["limits"]["cpus"] == 2' \
	'"exit %s, limits %s %s" % (r["exit"], r.get("limits"), r.get("error"))'
manifest "$S/open.json" '"policy": "open",' 'echo ok'
run_rbx run "$S/open.json" --json
check "control: \"unlimited\" written out is accepted and gives no limit" \
	'r["result"] == "success" and r["limits"]["timeout_ms"] is None and r["limits"]["memory_bytes"] is None and r["limits"]["pids"] is None' \
	'"exit %s, limits %s %s" % (r["exit"], r.get("limits"), r.get("error"))'
run_rbx run --image minimal --policy bare --json -- true
expect_json "a one-step run under a bare policy reports the default timeout" limits.timeout.requested_ms 1800000
run_rbx policy validate "$CFG/policies/open.json"
if [ "$RC" = 0 ] && grep -q '^  open: limits.timeout: unlimited' <<<"$OUT" && grep -q '^  open: limits.memory: unlimited' <<<"$OUT" &&
	grep -q '^  open: limits.pids: unlimited' <<<"$OUT"; then ok "policy validate lists each unlimited setting"
else not_ok "policy validate lists each unlimited setting" "exit $RC: $(tr '\n' '|' <<<"$OUT$ERR")"; fi
run_rbx policy validate "$CFG/policies/bare.json"
if [ "$RC" = 0 ] && ! grep -q 'open:' <<<"$OUT"; then ok "control: policy validate lists nothing open for a bare policy"
else not_ok "control: policy validate lists nothing open for a bare policy" "exit $RC: $(tr '\n' '|' <<<"$OUT$ERR")"; fi
RBX_ENV=()

# ---------------------------------------------------------------------------------------
# 4. The small ones.
# A duration without a unit is refused, the message saying the units; with one it runs.
run_rbx run --image minimal --timeout 10 -- true
if [ "$RC" = 125 ] && err_has 'with a unit (ms, s, m or h)'; then ok "--timeout 10 (no unit) is refused, naming the units"
else not_ok "--timeout 10 (no unit) is refused, naming the units" "exit $RC: $(first_line "$ERR")"; fi
put "$S/unitless.json" '{"name": "unitless", "limits": {"timeout": "10"}}'
run_rbx policy validate "$S/unitless.json"
if [ "$RC" = 125 ] && err_has 'limits.timeout: expected a duration like "30s" (a number, then us, ms, s, m or h), got "10"'; then
	ok "a policy's \"10\" duration is refused, naming the units"
else not_ok "a policy's \"10\" duration is refused, naming the units" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image minimal --timeout 10s -- true
if [ "$RC" = 0 ]; then ok "control: --timeout 10s runs"; else not_ok "control: --timeout 10s runs" "exit $RC: $(first_line "$ERR")"; fi

# Negative, zero and overflowing numbers never reach the kernel.
for bad in "--pids -5" "--pids 0" "--pids 99999999999999999999" "--pids 5x" "--cpus -1" "--cpus 0" "--cpus nan" \
	"--memory -5M" "--memory 0" "--memory 99999999999T" "--timeout -1s" "--timeout 0s"; do
	# shellcheck disable=SC2086 # the flag and its value
	run_rbx run --image minimal $bad -- true
	if [ "$RC" = 125 ] && err_has "${bad%% *} \`${bad#* }\`: expected"; then ok "$bad is refused, naming the flag"
	else not_ok "$bad is refused, naming the flag" "exit $RC: $(first_line "$ERR")"; fi
done
run_rbx run --image minimal --pids 64 --cpus 0.5 --memory 64M -- true
if [ "$RC" = 0 ]; then ok "control: --pids 64 --cpus 0.5 --memory 64M run"; else not_ok "control: --pids 64 --cpus 0.5 --memory 64M run" "exit $RC: $(first_line "$ERR")"; fi

# validate builds the seccomp filter as run does: an unknown syscall fails both.
put "$S/badcall.json" '{"name": "badcall", "seccomp": {"deny": ["no_such_syscall_x"]}}'
run_rbx policy validate "$S/badcall.json"
v_rc=$RC v_err=$ERR
run_rbx run --image minimal --policy "$S/badcall.json" -- true
if [ "$v_rc" = 125 ] && grep -q no_such_syscall_x <<<"$v_err" && [ "$RC" = 125 ] && err_has no_such_syscall_x; then
	ok "policy validate refuses an unknown syscall, as run does"
else not_ok "policy validate refuses an unknown syscall, as run does" "validate exit $v_rc ($(first_line "$v_err")), run exit $RC"; fi
put "$S/goodcall.json" '{"name": "goodcall", "seccomp": {"deny": ["mknod"]}}'
run_rbx policy validate "$S/goodcall.json"
if [ "$RC" = 0 ]; then ok "control: policy validate accepts a real syscall"; else not_ok "control: policy validate accepts a real syscall" "exit $RC: $(first_line "$ERR")"; fi

# Two inputs on one destination: a clear error naming both.
put "$S/in-a" a
put "$S/in-b" b
run_rbx run --image minimal --input "$S/in-a:/workspace/in/x" --input "$S/in-b:/workspace/in/x" -- true
if [ "$RC" = 125 ] && err_has "--input \`$S/in-a:/workspace/in/x\` and --input \`$S/in-b:/workspace/in/x\`: both go to /workspace/in/x"; then
	ok "a duplicate --input destination is refused, naming both"
else not_ok "a duplicate --input destination is refused, naming both" "exit $RC: $(first_line "$ERR")"; fi
mkdir -p "$S/in-d"
chmod a+rx "$S/in-d"
run_rbx run --image minimal --input "$S/in-d:/workspace/in/d" --input "$S/in-b:/workspace/in/d/b" -- true
if [ "$RC" = 125 ] && err_has "/workspace/in/d and /workspace/in/d/b: one lies inside the other"; then
	ok "an --input inside another's destination is refused, naming both"
else not_ok "an --input inside another's destination is refused, naming both" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --image minimal --input "$S/in-a:/workspace/in/x" --input "$S/in-b:/workspace/in/y" -- cat /workspace/in/x /workspace/in/y
if [ "$RC" = 0 ] && [ "$OUT" = "$(printf 'a\nb')" ]; then ok "control: two destinations run"
else not_ok "control: two destinations run" "exit $RC: $(first_line "$ERR$OUT")"; fi

# A manifest's input errors name its key, never a --input flag.
put "$S/in-missing.json" "{\"tenant\": \"t\", \"agent\": \"a\", \"image\": \"minimal\", \"inputs\": [{\"from\": \"in-a\"}, {\"from\": \"no-such-file\"}], \"steps\": [{\"script\": \"true\"}]}"
run_rbx run "$S/in-missing.json" --json
if [ "$RC" = 125 ] && err_has "inputs[1].from" && ! err_has -- "--input"; then ok "a manifest's missing input is named by its key (inputs[1].from)"
else not_ok "a manifest's missing input is named by its key" "exit $RC: $(first_line "$ERR")"; fi
put "$S/in-dup.json" "{\"tenant\": \"t\", \"agent\": \"a\", \"image\": \"minimal\", \"inputs\": [{\"from\": \"in-a\", \"to\": \"/workspace/in/z\"}, {\"from\": \"/etc/shadow\", \"to\": \"/workspace/in/w\"}], \"steps\": [{\"script\": \"true\"}]}"
run_rbx run "$S/in-dup.json" --json
if [ "$RC" = 125 ] && err_has "inputs[1].from \`/etc/shadow\`" && ! err_has -- "--input"; then ok "a manifest's never-an-input is named by its key (inputs[1].from)"
else not_ok "a manifest's never-an-input is named by its key" "exit $RC: $(first_line "$ERR")"; fi
put "$S/in-ok.json" "{\"tenant\": \"t\", \"agent\": \"a\", \"image\": \"minimal\", \"inputs\": [{\"from\": \"in-a\"}, {\"from\": \"in-b\"}], \"steps\": [{\"script\": \"cat /workspace/in/in-a /workspace/in/in-b\"}]}"
run_rbx run "$S/in-ok.json" --json
check "control: the manifest's inputs that exist run" 'r["result"] == "success" and r["steps"][0]["stdout"] == "a\nb\n"' \
	'"exit %s: %s" % (r["exit"], r.get("error"))'
run_rbx run --image minimal --input "$S/no-such-file" -- true
if [ "$RC" = 125 ] && err_has "--input \`$S/no-such-file\`"; then ok "control: the command line's missing input is named as --input"
else not_ok "control: the command line's missing input is named as --input" "exit $RC: $(first_line "$ERR")"; fi
run_rbx run --input "$S/in-a" "$S/in-ok.json" --json
if [ "$RC" = 125 ] && err_has "--input does not combine with a manifest"; then ok "--input beside a manifest is refused, not dropped"
else not_ok "--input beside a manifest is refused, not dropped" "exit $RC: $(first_line "$ERR")"; fi
