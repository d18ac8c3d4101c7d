#!/usr/bin/env bash
# Results and exit codes: the step's status, 128+n, 124, 125, 126, 127; the --json object;
# timeouts; limits reported; policy loading and validation; runbox check.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init result

# expect_rc NAME WANT [RUN-OPTIONS] -- CMD...: one step; the CLI exits WANT.
expect_rc() {
	local name=$1 want=$2
	shift 2
	sb "$@"
	if [ "$RC" = "$want" ]; then ok "$name"; else not_ok "$name" "exit $RC, want $want ($(first_line "$ERR"))"; fi
}

# --- exit codes (controls: the probe gives the same status outside, so runbox passes it on) ---
control 3 "$PROBE" exit 3 || note "control: probe exit 3 gave $CTRL outside"
expect_rc "exit 0 passes through" 0 -- /bin/probe exit 0
expect_rc "exit 3 passes through" 3 -- /bin/probe exit 3
expect_rc "exit 255 passes through" 255 -- /bin/probe exit 255
control 137 "$PROBE" kill-self 9 || note "control: kill-self 9 gave $CTRL outside"
expect_rc "SIGKILL gives 137" 137 -- /bin/probe kill-self 9
expect_rc "SIGTERM gives 143" 143 -- /bin/probe kill-self 15
expect_rc "not executable gives 126" 126 -- /etc/passwd
expect_rc "missing command gives 127" 127 -- /nonexistent/cmd
expect_rc "missing command on PATH gives 127" 127 -- rbx-no-such-command
expect_rc "a directory gives 126" 126 -- /etc

# 125: runbox's own failures, with exactly one line on stderr.
expect125() {
	local name=$1
	shift
	run_rbx "$@"
	local lines
	lines=$(printf '%s' "$ERR" | grep -c '')
	if [ "$RC" != 125 ]; then not_ok "$name" "exit $RC, want 125 ($(first_line "$ERR"))"
	elif [ "$lines" != 1 ]; then not_ok "$name" "$lines lines on stderr: $(tr '\n' '|' <<<"$ERR")"
	else ok "$name"; fi
}
expect125 "bad flag gives 125 and one line" run --image minimal --no-such-flag -- /bin/true
expect125 "unknown image gives 125" run --image no-such-image -- /bin/true
expect125 "unknown policy gives 125" run --image minimal --policy no-such-policy -- /bin/true
echo '{"name": "bad", "no_such_key": 1}' >"$T/scratch/bad.json"
echo '{"name": "bad", "limits": {"pids": "many"}}' >"$T/scratch/badtype.json"
echo '{"name": ' >"$T/scratch/broken.json"
chmod a+r "$T"/scratch/*.json
expect125 "policy with an unknown key gives 125" run --image minimal --policy "$T/scratch/bad.json" -- /bin/true
if grep -q no_such_key <<<"$ERR"; then ok "the error names the unknown key"
else not_ok "the error names the unknown key" "stderr: $(first_line "$ERR")"; fi
expect125 "policy with a wrong type gives 125" run --image minimal --policy "$T/scratch/badtype.json" -- /bin/true
if grep -q pids <<<"$ERR"; then ok "the error names the wrong-typed key"
else not_ok "the error names the wrong-typed key" "stderr: $(first_line "$ERR")"; fi
expect125 "malformed policy JSON gives 125" run --image minimal --policy "$T/scratch/broken.json" -- /bin/true
expect125 "bad --timeout gives 125" run --image minimal --timeout soon -- /bin/true
expect125 "no command gives 125" run --image minimal --

# --- runbox policy validate / show ---
run_rbx policy validate "$ROOT/policy/profiles/default.json"
if [ "$RC" = 0 ]; then ok "policy validate default.json"; else not_ok "policy validate default.json" "exit $RC: $(first_line "$ERR")"; fi
run_rbx policy validate "$ROOT/policy/profiles/strict.json"
if [ "$RC" = 0 ]; then ok "policy validate strict.json"; else not_ok "policy validate strict.json" "exit $RC: $(first_line "$ERR")"; fi
run_rbx policy validate "$T/scratch/bad.json"
if [ "$RC" != 0 ] && grep -q no_such_key <<<"$ERR$OUT"; then ok "policy validate rejects an unknown key, naming it"
else not_ok "policy validate rejects an unknown key, naming it" "exit $RC: $(first_line "$ERR")"; fi
run_rbx policy show strict
# Comment lines (path, hash) may precede the JSON.
if [ "$RC" = 0 ] && "$PY" -c 'import json,sys; json.loads(sys.argv[1])' "$(grep -v '^#' <<<"$OUT")" 2>/dev/null; then
	ok "policy show strict prints JSON"
else not_ok "policy show strict prints JSON" "exit $RC: $(first_line "$ERR")"; fi

# --- runbox check ---
run_rbx check
if [ "$RC" != 125 ] && grep -qi 'user namespace' <<<"$OUT$ERR" && grep -qi seccomp <<<"$OUT$ERR" &&
	grep -qi cgroup <<<"$OUT$ERR"; then
	ok "check reports user namespaces, seccomp and cgroups"
else not_ok "check reports user namespaces, seccomp and cgroups" "exit $RC: $(first_line "$OUT$ERR")"; fi
if grep -Eqi '\b(ok|degraded|missing)\b' <<<"$OUT"; then ok "check prints ok/degraded/missing"
else not_ok "check prints ok/degraded/missing" "$(first_line "$OUT")"; fi

# --- --json ---
sb --json -- /bin/sh -c 'echo hi; echo oops >&2; exit 3'
if [ "$RC" != 3 ]; then not_ok "--json run exits with the step's status" "exit $RC: $(first_line "$ERR")"
else ok "--json run exits with the step's status"; fi
if json "$T/out" status >/dev/null 2>&1; then ok "--json prints one JSON object"
else not_ok "--json prints one JSON object" "stdout: $(first_line "$OUT")"; fi
expect_json "json status exited" status exited
expect_json "json exit_code" exit_code 3
expect_json "json exit" exit 3
expect_json "json timed_out false" timed_out false
expect_json "json oom_killed false" oom_killed false
expect_json "json stdout captured" stdout hi
expect_json "json stderr captured" stderr oops
expect_json "json stdout_truncated false" stdout_truncated false
expect_json "json image name" image.name minimal
for k in run_id wall_ms cpu.user_ms cpu.system_ms image.digest policy.name policy.hash sandbox.rootless; do
	if v=$(json "$T/out" "$k" 2>/dev/null) && [ -n "$v" ] && [ "$v" != null ]; then ok "json has $k"
	else not_ok "json has $k" "missing or empty"; fi
done
hash1=$(json "$T/out" policy.hash 2>/dev/null)
sb --json --policy strict -- /bin/true
hash2=$(json "$T/out" policy.hash 2>/dev/null)
if [ -n "$hash1" ] && [ -n "$hash2" ] && [ "$hash1" != "$hash2" ]; then ok "policy hash differs between policies"
else not_ok "policy hash differs between policies" "default $hash1, strict $hash2"; fi
expect_json "json policy name strict" policy.name strict
sb --json -- /bin/probe kill-self 9
expect_json "json status signaled" status signaled
expect_json "json signal 9" signal 9
expect_json "json exit 137" exit 137
# A syscall the filter kills (an x32 number, bit 30: killed on every host, since seccomp sees
# it before the kernel's dispatch) is flagged as a seccomp kill; not being killed is the
# regression. The control is the next check: a step that exits normally is not flagged.
sb --json -- /bin/probe x32-getpid
sig=$(json "$T/out" signal 2>/dev/null)
if [ "$RC" != 159 ] || [ "$sig" != 31 ]; then
	not_ok "the x32 call is killed by SIGSYS" "exit $RC, signal ${sig:-none} ($(first_line "$ERR"))"
else ok "the x32 call is killed by SIGSYS"; fi
expect_json "json seccomp_killed true on SIGSYS" seccomp_killed true
sb --json -- /bin/probe exit 0
expect_json "json seccomp_killed false normally" seccomp_killed false
sb --json -- /nonexistent/cmd
expect_json "json exit 127 for a missing command" exit 127
if [ "$RC" = 127 ]; then ok "--json missing command exits 127"; else not_ok "--json missing command exits 127" "exit $RC"; fi
# Output caps: 3 MB of output is truncated to the cap and says so.
sb --json -- /bin/sh -c 'head -c 3000000 /dev/zero | tr "\0" x'
expect_json "json stdout_truncated true for 3 MB" stdout_truncated true
n=$(json "$T/out" stdout 2>/dev/null | wc -c)
if [ "$n" -gt 0 ] && [ "$n" -lt 3000000 ]; then ok "json stdout capped ($n bytes)"
else not_ok "json stdout capped" "$n bytes"; fi

# --- timeout ---
sb --timeout 300ms -- /bin/probe sleep-forever
if [ "$RC" = 124 ]; then ok "--timeout 300ms exits 124"; else not_ok "--timeout 300ms exits 124" "exit $RC: $(first_line "$ERR")"; fi
sb --timeout 300ms --json -- /bin/probe sleep-forever
expect_json "json timed_out true" timed_out true
expect_json "json status timeout" status timeout
sb --timeout 2.5s -- /bin/probe exit 0
if [ "$RC" = 0 ]; then ok "--timeout 2.5s accepted, fast step unaffected"; else not_ok "--timeout 2.5s accepted" "exit $RC"; fi
# A timeout kills the whole sandbox, background processes included.
m=$(new_marker)
sb --timeout 500ms -- /bin/sh -c "/bin/probe sleep-forever $m & /bin/probe sleep-forever $m"
if [ "$RC" != 124 ]; then not_ok "timeout kills background processes too" "exit $RC"
elif wait_for no_marker "$m"; then ok "timeout kills background processes too"
else not_ok "timeout kills background processes too" "still running: $(pids_with "$m" | tr '\n' ' ')"; fi

# --- limits: each requested limit is reported, enforced or not, never dropped ---
sb --json --memory 64M --pids 64 --cpus 1 -- /bin/true
for l in memory pids cpus; do
	e=$(json "$T/out" "limits.$l.enforced" 2>/dev/null)
	r=$(json "$T/out" "limits.$l.reason" 2>/dev/null)
	if [ "$e" = true ]; then ok "limit $l reported (enforced)"
	elif [ "$e" = false ] && [ -n "$r" ] && [ "$r" != null ]; then ok "limit $l reported (not enforced: $r)"
	else not_ok "limit $l reported" "enforced=$e reason=$r"; fi
done
# oom_killed also when the OOM-killed process was the shell's child (the shell exits 137 itself);
# control: the same shell with a small appetite. Where memory is not enforced, nothing to see.
if [ "$(json "$T/out" limits.memory.enforced 2>/dev/null)" = true ]; then
	sb --json --memory 64M -- /bin/sh -c '/bin/probe alloc 256; exit $?'
	k=$(json "$T/out" oom_killed 2>/dev/null)
	if [ "$RC" = 137 ] && [ "$k" = true ]; then ok "oom_killed when a shell's child is OOM-killed"
	else not_ok "oom_killed when a shell's child is OOM-killed" "exit $RC oom_killed=$k"; fi
	sb --json --memory 64M -- /bin/sh -c '/bin/probe alloc 16; exit $?'
	k=$(json "$T/out" oom_killed 2>/dev/null)
	if [ "$RC" = 0 ] && [ "$k" = false ]; then ok "control: 16M under 64M, oom_killed false"
	else not_ok "control: 16M under 64M, oom_killed false" "exit $RC oom_killed=$k"; fi
elif [ "$MODE" = root ] && awk '$1 == "memory" && $4 == 1 { f = 1 } END { exit !f }' /proc/cgroups; then
	# As root, with the kernel's memory controller enabled, nothing excuses an unenforced limit.
	not_ok "oom_killed through a shell" "--memory not enforced as root: $(json "$T/out" limits.memory.reason 2>/dev/null)"
else
	host_limit "oom_killed through a shell" "memory is not enforced in this mode ($(json "$T/out" limits.memory.reason 2>/dev/null))"
fi

# --- a long command line reaches the step whole ---
# Ten arguments of 100 KB (1 MB, within Linux's 2 MiB ARG_MAX) travel to init as a sealed
# memfd, not in one control message (64 KiB); the step sees each of them, byte for byte.
big=$(head -c 100000 /dev/zero | tr '\0' 'a')
sb -- /bin/sh -c 'echo "$# ${#1} ${#10}"; printf %s "${10}" | md5sum' x "$big" "$big" "$big" "$big" "$big" \
	"$big" "$big" "$big" "$big" "${big%a}b"
want="10 100000 100000
$(printf %s "${big%a}b" | md5sum)"
if [ "$RC" = 0 ] && [ "$OUT" = "$want" ]; then ok "a 1 MB command line reaches the step whole"
else not_ok "a 1 MB command line reaches the step whole" "exit $RC: $(first_line "$OUT$ERR")"; fi

# One serializer for a step's output: bytes that are not UTF-8 come as base64 under
# stdout_base64, in a one-step run's --json and in a manifest's step alike (never a placeholder
# text). Control: a step printing text has `stdout` and no `stdout_base64`.
mkdir -p "$T/scratch/u8"
"$PY" - "$T/scratch/u8/m.json" <<'PYEOF'
import json, sys
json.dump({"tenant": "t-u8", "agent": "a-u8", "image": "minimal",
           "steps": [{"script": "printf '\\377x'"}, {"script": "printf text"}]}, open(sys.argv[1], "w"))
PYEOF
chmod -R a+rX "$T/scratch/u8"
sb --json -- /bin/sh -c "printf '\\377x'"
printf '%s' "$OUT" >"$T/out"
check "a one-step run's non-UTF-8 stdout is stdout_base64" \
	"r.get('stdout_base64') == '/3g=' and 'stdout' not in r" "r.get('stdout'), r.get('stdout_base64')"
run_manifest "$T/scratch/u8/m.json"
check "a manifest step's non-UTF-8 stdout is stdout_base64, as a one-step run's" \
	"r['steps'][0].get('stdout_base64') == '/3g=' and 'stdout' not in r['steps'][0]" \
	"[s.get('stdout') for s in r.get('steps', [])], [s.get('stdout_base64') for s in r.get('steps', [])]"
check "control: a manifest step's text stdout is stdout" \
	"r['steps'][1].get('stdout') == 'text' and 'stdout_base64' not in r['steps'][1]" "r.get('steps')"
