#!/usr/bin/env bash
# `runbox run` as a container user types it: options before or after a manifest, a manifest from
# stdin, a line per step as it ends and the run id, JSON without a float's noise, -e within the
# policy's env.pass, --label in the ledger, --version.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init runopts

runid() { sed -n 's/^runbox: run \([0-9a-f]*\)$/\1/p' <<<"$ERR" | head -n 1; }
"$PY" - "$T/m.json" <<'EOF'
import json, sys
json.dump({"tenant": "acme", "agent": "opts", "image": "minimal", "policy": "strict",
           "steps": [{"name": "first", "script": "echo 1 > /workspace/out/a.txt"},
                     {"name": "second", "script": "echo 2 > /workspace/out/b.txt; exit 3"}]}, open(sys.argv[1], "w"))
EOF
chmod a+r "$T/m.json"

# 1. --json after the manifest means what it means before it; without it, text (the control).
run_rbx run "$T/m.json" --json
a_rc=$RC a=$(rj "[r['result'], r['exit'], len(r['steps'])]")
run_rbx run --json "$T/m.json"
b_rc=$RC b=$(rj "[r['result'], r['exit'], len(r['steps'])]")
run_rbx run "$T/m.json"
if [ "$a_rc" = 3 ] && [ "$b_rc" = 3 ] && [ "$a" = '["failure", 3, 2]' ] && [ "$a" = "$b" ] && ! rj 1 >/dev/null; then
	ok "run SPEC --json == run --json SPEC (control: without --json the output is not JSON)"
else not_ok "run SPEC --json == run --json SPEC" "after $a_rc $a, before $b_rc $b; $(first_line "$ERR")"; fi

# 2. Text mode: a line per step (name, status, exit, wall, artifacts, redactions), the summary
# with the run id last, the run id on stderr.
id=$(runid)
l1=$(sed -n 1p <<<"$OUT") l2=$(sed -n 2p <<<"$OUT") l3=$(sed -n 3p <<<"$OUT")
if [ -n "$id" ] && [[ $l1 =~ ^step\ 1\ first:\ success,\ exit\ 0,\ [0-9.]+\ ms,\ 1\ artifact,\ 0\ redactions$ ]] &&
	[[ $l2 =~ ^step\ 2\ second:\ failure,\ exit\ 3,\ [0-9.]+\ ms,\ 2\ artifacts, ]] &&
	[ "$l3" = "run $id: failure, 2 steps, 2 artifacts, 0 redactions, exit 3" ]; then
	ok "run SPEC: a line per step and a summary with the run id (also on stderr)"
else not_ok "run SPEC: text mode" "stderr id '$id'; $(printf '%s' "$OUT" | tr '\n' '|')"; fi

# 3. ... streamed: step 1's line is out while step 2 still runs (the control: the summary is not).
"$PY" - "$T/slow.json" <<'EOF'
import json, sys
json.dump({"tenant": "acme", "agent": "opts", "image": "minimal", "policy": "strict",
           "steps": [{"name": "quick", "script": "true"},
                     {"name": "slow", "script": "sleep 4"}]}, open(sys.argv[1], "w"))
EOF
chmod a+r "$T/slow.json"
rbx run "$T/slow.json" >"$T/stream" 2>/dev/null </dev/null &
bg=$!
stream_has() { grep -q '^step 1 quick' "$T/stream"; }
if wait_for stream_has && ! grep -q '^run ' "$T/stream"; then mid=yes; else mid="no: $(tr '\n' '|' <"$T/stream")"; fi
wait $bg
if [ "$mid" = yes ] && grep -q '^run .*success' "$T/stream"; then ok "run SPEC: each step's line as it ends (the summary only at the end)"
else not_ok "run SPEC: streamed lines" "$mid"; fi

# 4. A manifest from stdin with `-`; an empty stdin is a manifest error (the control).
rbx run - <"$T/m.json" >"$T/out" 2>"$T/err"
RC=$?
OUT=$(cat "$T/out")
s_ok=$(grep -c '^step ' <<<"$OUT")
rbx run - </dev/null >"$T/out" 2>"$T/err"
e_rc=$?
if [ "$RC" = 3 ] && [ "$s_ok" = 2 ] && [ "$e_rc" = 125 ] && grep -q "stdin" "$T/err"; then
	ok "run -: the manifest from stdin (control: an empty stdin is refused, 125, naming stdin)"
else not_ok "run -" "exit $RC with $s_ok step lines; empty: $e_rc $(first_line "$(cat "$T/err")")"; fi

# 5. --json: times without a float's noise (15 significant digits at most); the check itself
# catches the noise it guards against (the control).
noise() { # prints the numbers of FILE with more than 15 significant digits (a double's noise)
	"$PY" - "$1" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
nums = re.findall(r'(?<![\w."])-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?', text)
bad = [n for n in nums if len(re.sub(r'[eE].*', '', n).replace('-', '').replace('.', '').lstrip('0')) > 15]
print(" ".join(bad[:3]))
sys.exit(0 if bad else 1)
PYEOF
}
printf '{"wall_ms": 85.766999999999996}\n' >"$T/noisy"
run_rbx run --json "$T/m.json"
cp "$T/out" "$T/m.out"
sb --json -- true
if noise "$T/noisy" >/dev/null && ! noise "$T/m.out" >/dev/null && ! noise "$T/out" >/dev/null && grep -q '"wall_ms": [0-9]' "$T/out"; then
	ok "--json: times printed as rounded milliseconds, no float noise (control: the check sees 85.766999999999996)"
else not_ok "--json: float noise" "$(noise "$T/m.out") $(noise "$T/out")"; fi

# 6. -e NAME=VALUE and -e NAME for a name the policy passes; one it does not pass is an error
# saying so; without -e the variable is not there (the control).
policy_variant default "$T/pol.json" envpass 'p["env"]["pass"] = ["MYVAR"]'
sb --policy "$T/pol.json" -e MYVAR=hello -- sh -c 'echo "[$MYVAR]"'
set_v=$OUT set_rc=$RC
RBX_ENV=(MYVAR=fromhost)
sb --policy "$T/pol.json" -e MYVAR -- sh -c 'echo "[$MYVAR]"'
host_v=$OUT
unset RBX_ENV
sb --policy "$T/pol.json" -- sh -c 'echo "[$MYVAR]"'
none_v=$OUT
sb --policy "$T/pol.json" -e OTHER=1 -- sh -c 'echo "[$OTHER]"'
if [ "$set_rc" = 0 ] && [ "$set_v" = "[hello]" ] && [ "$host_v" = "[fromhost]" ] && [ "$none_v" = "[]" ] &&
	[ "$RC" = 125 ] && grep -q "policy \`envpass\` does not pass it" <<<"$ERR" && ! grep -q "OTHER" <<<"$OUT"; then
	ok "-e NAME=VALUE / -e NAME within env.pass; a name it does not pass refused, 125 (control: no -e, no variable)"
else not_ok "-e" "set '$set_v' ($set_rc) host '$host_v' none '$none_v'; other $RC $(first_line "$ERR")"; fi

# 7. --label K=V lands in the run's run_start; a run without one has none (the control).
sb --label team=data --label ticket=42 -- true
lid=$(runid)
sb -- true
nid=$(runid)
labels() { rbx ledger query --run "$1" --type run_start --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.dumps(json.load(sys.stdin)[0]["data"].get("labels"), sort_keys=True))'; }
if [ "$(labels "$lid")" = '{"team": "data", "ticket": "42"}' ] && [ "$(labels "$nid")" = null ]; then
	ok "--label K=V recorded in run_start (control: none without --label)"
else not_ok "--label" "with '$(labels "$lid")' without '$(labels "$nid")'"; fi
sb --label novalue -- true
if [ "$RC" = 125 ] && grep -q "KEY=VALUE" <<<"$ERR"; then ok "--label without = is refused (125)"
else not_ok "--label without =" "exit $RC"; fi

# 8. --version, at the top and on run; an unknown option is still refused (the control).
run_rbx --version
v1=$OUT r1=$RC
run_rbx run --version
v2=$OUT r2=$RC
run_rbx run --versionx
if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [[ $v1 =~ ^runbox\ [0-9] ]] && [ "$v1" = "$v2" ] && [ "$RC" = 125 ]; then
	ok "--version prints runbox's version (control: a misspelt option is refused)"
else not_ok "--version" "'$v1' $r1 / '$v2' $r2 / misspelt $RC"; fi

# 9. runbox logs RUN: the run's captured output from its records, stdout to stdout and stderr to
# stderr, scrubbed as the run kept it; --step N that step only; another tenant gets nothing.
sb -- sh -c 'echo "out one"; echo "err one" >&2; echo "key AKIAIOSFODNN7EXAMPLQ"'
gid=$(runid)
run_rbx logs "$gid"
l_out=$OUT l_err=$ERR l_rc=$RC
run_rbx logs "$gid" --tenant other
o_rc=$RC
if [ "$l_rc" = 0 ] && grep -q '^out one$' <<<"$l_out" && [ "$l_err" = "err one" ] && ! grep -q AKIAIOSFODNN7EXAMPLQ <<<"$l_out" &&
	grep -q REDACTED <<<"$l_out" && [ "$o_rc" = 125 ]; then
	ok "logs RUN: stdout and stderr as captured, scrubbed (control: another tenant is refused)"
else not_ok "logs RUN" "exit $l_rc out '$(printf '%s' "$l_out" | tr '\n' '|')' err '$l_err'; other $o_rc"; fi
run_rbx run "$T/m.json"
mid=$(runid)
run_rbx logs "$mid" --tenant acme --step 2
s2=$RC
run_rbx logs "$mid" --tenant acme --step 3
if [ "$s2" = 0 ] && [ "$RC" = 125 ] && grep -q "no step 3" <<<"$ERR"; then ok "logs --step N: a step of the run; one it does not have is refused"
else not_ok "logs --step" "step 2 $s2, step 3 $RC: $(first_line "$ERR")"; fi
# ... as long as the run's results are kept: gc past its retention removes them, and logs says so.
touch -d '3 hours ago' "$STATE/results/$gid"
run_rbx gc --retention 1h
run_rbx logs "$gid"
g_rc=$RC g_err=$ERR
run_rbx logs "$mid" --tenant acme --step 1
if [ "$g_rc" = 1 ] && grep -q "no longer kept" <<<"$g_err" && [ "$RC" = 0 ]; then
	ok "logs: gone once gc removed the run's results (control: a newer run's are still there)"
else not_ok "logs after gc" "old $g_rc $(first_line "$g_err"); new $RC"; fi

# 10. -w DIR: the step starts in DIR; without it in /workspace (the control); a relative DIR is
# refused before anything runs; a DIR that is not there fails the step, naming it.
sb -w /workspace/out -- /bin/sh -c pwd
w1=$OUT r1=$RC
sb -- /bin/sh -c pwd
w0=$OUT
sb -w out -- true
r_rel=$RC
sb -w /no-such-dir -- true
if [ "$r1" = 0 ] && [ "$w1" = /workspace/out ] && [ "$w0" = /workspace ] && [ "$r_rel" = 125 ] && [ "$RC" != 0 ] &&
	grep -q "/no-such-dir" <<<"$ERR"; then
	ok "-w DIR: the step's working directory (control: /workspace without it; relative refused; missing named)"
else not_ok "-w" "with '$w1' ($r1), without '$w0', relative $r_rel, missing $RC $(first_line "$ERR")"; fi
