#!/usr/bin/env bash
# The ledger for people: `runbox ledger runs` (a line per run), tables that fit the terminal
# with cuts that still work as prefix filters, --wide, --last, --reverse, an unknown --type
# refused, and the compliance question ("what did agent X of tenant Y run at 18:03, and what
# did it produce") answered by one command with the exact command and full digests.
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init ledgerruns

runid() { sed -n 's/^runbox: run \([0-9a-f]*\)$/\1/p' <<<"$ERR" | head -n 1; }
LONG=weekly-report-generator-with-a-long-name
sb --tenant acme --agent "$LONG" -- sh -c 'echo "a,b" > /workspace/out/report.csv'
R1=$(runid)
sb --tenant acme --agent weekly-summary -- sh -c 'exit 2'
R2=$(runid)
sb --tenant globex --agent "$LONG" -- true
R3=$(runid)

# 1. One line per run: time, tenant, agent, run, result, steps, artifacts.
run_rbx ledger runs
l1=$(grep " $R1 " <<<"$OUT") l2=$(grep " $R2 " <<<"$OUT")
if [ "$RC" = 0 ] && [ "$(grep -c '^20' <<<"$OUT")" = 3 ] && [[ $l1 =~ acme\ +$LONG\ +$R1\ +success\ +1\ +1$ ]] &&
	[[ $l2 =~ acme\ +weekly-summary\ +$R2\ +failure\ +1\ +0$ ]]; then
	ok "ledger runs: a line per run with tenant, agent, run, result, steps and artifacts"
else not_ok "ledger runs" "exit $RC: $(printf '%s' "$OUT$ERR" | tr '\n' '|')"; fi

# 2. COLUMNS=90: every line fits, the long agent is cut with …, and the cut name pasted as shown
# finds its runs (both tenants') and not weekly-summary's; --wide (the control) is wider and
# has the whole name.
RBX_ENV=(COLUMNS=90)
run_rbx ledger runs
narrow=$OUT
run_rbx ledger runs --wide
wide=$OUT
unset RBX_ENV
maxw=$("$PY" -c 'import sys; print(max(len(l) for l in sys.stdin.read().splitlines()))' <<<"$narrow")
widew=$("$PY" -c 'import sys; print(max(len(l) for l in sys.stdin.read().splitlines()))' <<<"$wide")
cut=$(grep " acme " <<<"$narrow" | grep -o 'weekly-[^ ]*…' | head -n 1)
run_rbx ledger runs --agent "$cut"
found=$OUT
if [ "$maxw" -le 90 ] && [ "$widew" -gt 90 ] && [ -n "$cut" ] && grep -q "$LONG" <<<"$wide" &&
	grep -q " $R1 " <<<"$found" && grep -q " $R3 " <<<"$found" && ! grep -q " $R2 " <<<"$found"; then
	ok "ledger runs: fits COLUMNS=90 (widest $maxw), the cut name '$cut' works as a prefix filter (control: --wide is $widew wide)"
else not_ok "ledger runs: width and cut names" "narrow $maxw, wide $widew, cut '$cut': $(printf '%s' "$narrow" | tr '\n' '|') found $(printf '%s' "$found" | tr '\n' '|')"; fi

# 3. --agent and --run are prefixes; a string inside a name that does not start it finds nothing.
run_rbx ledger runs --agent weekly-
both=$(grep -c '^20' <<<"$OUT")
run_rbx ledger runs --agent report-generator
inside=$(grep -c '^20' <<<"$OUT")
run_rbx ledger runs --run "${R2:0:16}"
if [ "$both" = 3 ] && [ "$inside" = 0 ] && grep -q " $R2 " <<<"$OUT" && [ "$(grep -c '^20' <<<"$OUT")" = 1 ]; then
	ok "ledger runs --agent/--run: prefixes (control: a substring that is not a prefix finds nothing)"
else not_ok "ledger runs: prefix filters" "weekly- $both, inside $inside, run: $(printf '%s' "$OUT" | tr '\n' '|')"; fi
run_rbx ledger query --agent "${LONG:0:10}…" --type run_start
if [ "$RC" = 0 ] && grep -q '(2 events)' <<<"$OUT"; then ok "ledger query --agent: a pasted cut name is a prefix too"
else not_ok "ledger query --agent prefix" "exit $RC: $(printf '%s' "$OUT$ERR" | tail -n 1)"; fi

# 4. --last N keeps the newest N, --reverse shows newest first; the default (the control) is
# oldest first.
run_rbx ledger runs --last 2
last=$(grep '^20' <<<"$OUT" | awk '{print $4}' | tr '\n' ' ')
run_rbx ledger runs --last 2 --reverse
rev=$(grep '^20' <<<"$OUT" | awk '{print $4}' | tr '\n' ' ')
run_rbx ledger query --type run_start --last 1
qlast=$OUT
if [ "$last" = "$R2 $R3 " ] && [ "$rev" = "$R3 $R2 " ] && grep -q " $R3 " <<<"$qlast" && ! grep -q " $R1 " <<<"$qlast"; then
	ok "ledger runs|query --last N: the newest N; --reverse newest first (control: oldest first by default)"
else not_ok "--last / --reverse" "last '$last' rev '$rev' query: $(printf '%s' "$qlast" | tr '\n' '|')"; fi

# 5. An unknown --type is refused, 125, listing the types; a known one (the control) is not.
run_rbx ledger query --type step_started
bad=$RC bad_err=$ERR
run_rbx ledger query --type step_start
if [ "$bad" = 125 ] && grep -q 'step_start' <<<"$bad_err" && grep -q 'run_end' <<<"$bad_err" && [ "$RC" = 0 ]; then
	ok "ledger query --type: unknown refused (125) with the list of types (control: a known type lists events)"
else not_ok "ledger query --type" "unknown $bad: $(first_line "$bad_err"); known $RC"; fi

# 6. The compliance question in one command: runs of agent X of tenant Y started in a minute,
# with the exact command, its size and sha256, and the artifacts with full digests. The other
# tenant's run of the same agent in the same minute (the control) is not in it.
minute=$(rbx ledger query --run "$R1" --type run_start --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["ts"][:16])')
run_rbx ledger runs --tenant acme --agent "$LONG" --since "$minute" --until "$minute" --detail
digest=$(rbx artifact ls "$R1" --tenant acme | awk '$NF == "report.csv" {print $3}')
cmd='["sh","-c","echo \"a,b\" > /workspace/out/report.csv"]'
size=$(printf '%s' "$cmd" | wc -c)
sha=$(printf '%s' "$cmd" | sha256sum | cut -d' ' -f1)
if [ "$RC" = 0 ] && grep -q "^run $R1  tenant acme  agent $LONG" <<<"$OUT" && grep -qF -- "| $cmd" <<<"$OUT" &&
	grep -q "step 1 command at .*, $size bytes, sha256:$sha$" <<<"$OUT" && [ -n "$digest" ] &&
	grep -q "artifact $digest  4 bytes  report.csv" <<<"$OUT" && ! grep -q "$R3" <<<"$OUT" && grep -q '(1 run)' <<<"$OUT"; then
	ok "ledger runs --detail: the exact command, its size and sha256, the artifacts' full digests (control: the other tenant's run is absent)"
else not_ok "ledger runs --detail" "exit $RC: $(printf '%s' "$OUT$ERR" | tr '\n' '|' | cut -c 1-400)"; fi
