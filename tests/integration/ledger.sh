#!/usr/bin/env bash
# `runbox ledger`: a ledger whose events are written by an independent implementation of the
# documented hash chain (Python's sqlite3, docs/ledger.md) verifies intact; show, query (every
# filter, a literal grep) and export read it back; then an event edited, or deleted from the
# middle or the end, with the sqlite3 tool makes verify fail, each against an intact control.
# modes: root subids
. "$(dirname "$0")/../lib.sh"
lib_init ledger

DB=$STATE/ledger.db
ZERO=0000000000000000000000000000000000000000000000000000000000000000

# sql DB STATEMENTS: the sqlite3 tool, or Python's sqlite3 module where the tool is missing.
sql() {
	if command -v sqlite3 >/dev/null; then
		sqlite3 "$1" "$2"
	else
		"$PY" -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$1" "$2"
	fi
}

# py_append STATE_DIR < JSON lines [ts, run_id, tenant, agent, type, data]: appends each as
# the documented chain says, updates ledger.head, prints the last hash.
PY_APPEND=$(
	cat <<'EOF'
import hashlib, json, os, sqlite3, sys
state = sys.argv[1]
db = sqlite3.connect(os.path.join(state, "ledger.db"), isolation_level=None)
db.execute("BEGIN IMMEDIATE")
row = db.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
seq, prev = row if row else (0, "0" * 64)
for line in sys.stdin:
    ts, run, tenant, agent, typ, data = json.loads(line)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    seq += 1
    h = hashlib.sha256("\n".join([prev, str(seq), ts, run, tenant, agent, typ, text]).encode()).hexdigest()
    db.execute("INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?)", (seq, ts, run, tenant, agent, typ, text, prev, h))
    prev = h
db.execute("COMMIT")
with open(os.path.join(state, "ledger.head.tmp"), "w") as f:
    f.write("%d %s\n" % (seq, prev))
os.rename(os.path.join(state, "ledger.head.tmp"), os.path.join(state, "ledger.head"))
# Owned as the ledger is, so the runs that follow (as the mode's user) can move it on.
st = os.stat(os.path.join(state, "ledger.db"))
os.chown(os.path.join(state, "ledger.head"), st.st_uid, st.st_gid)
print(prev)
EOF
)
py_append() { "$PY" -c "$PY_APPEND" "$1"; }

# seqs FILE: the seq fields of the JSON array in FILE, as "1,2,3".
seqs() {
	"$PY" -c 'import json, sys; print(",".join(str(e["seq"]) for e in json.load(open(sys.argv[1]))))' "$1"
}

# expect125 NAME ARGS...: runbox ledger exits 125 with one line on stderr.
expect125() {
	local name=$1 lines
	shift
	run_rbx ledger "$@"
	lines=$(printf '%s' "$ERR" | grep -c '')
	if [ "$RC" != 125 ]; then not_ok "$name" "exit $RC, want 125 ($(first_line "$ERR"))"
	elif [ "$lines" != 1 ]; then not_ok "$name" "$lines lines on stderr: $(tr '\n' '|' <<<"$ERR")"
	else ok "$name"; fi
}

# expect_seqs NAME WANT QUERY-ARGS...: `ledger query --json` returns exactly the seqs WANT.
expect_seqs() {
	local name=$1 want=$2 got
	shift 2
	run_rbx ledger query --json "$@"
	if [ "$RC" != 0 ]; then not_ok "$name" "exit $RC: $(first_line "$ERR")"; return; fi
	got=$(seqs "$T/out")
	if [ "$got" = "$want" ]; then ok "$name"; else not_ok "$name" "seqs [$got], want [$want]"; fi
}

# --- an empty ledger, and no ledger invented for a mistyped state directory ---
run_rbx ledger --state-dir "$T/no-such-state" verify
if [ "$RC" = 125 ] && [ ! -e "$T/no-such-state" ]; then ok "a missing state directory is an error, not an empty ledger"
else not_ok "a missing state directory is an error, not an empty ledger" "exit $RC, exists: $([ -e "$T/no-such-state" ] && echo yes || echo no)"; fi
# verify in a state directory that holds no ledger fails, naming it, and makes none: "intact"
# would say nothing. Control: once a ledger exists (query makes an empty one), it verifies.
run_rbx ledger verify
if [ "$RC" != 0 ] && grep -qF "no ledger in \`$STATE\`" <<<"$ERR" && [ -z "$(ls -A "$STATE")" ]; then
	ok "verify where there is no ledger fails and creates nothing"
else not_ok "verify where there is no ledger fails and creates nothing" "exit $RC, left: $(ls -A "$STATE" | tr '\n' ' '): $(first_line "$OUT$ERR")"; fi
run_rbx ledger query
run_rbx ledger verify
if [ "$RC" = 0 ] && [ "$OUT" = "ledger intact: 0 events, head $ZERO" ]; then ok "an empty ledger verifies"
else not_ok "an empty ledger verifies" "exit $RC: $(first_line "$OUT$ERR")"; fi
mode=$(stat -c %a "$DB" 2>/dev/null)
if [ "$mode" = 600 ]; then ok "ledger.db is private (0600)"; else not_ok "ledger.db is private (0600)" "mode $mode"; fi

# --- a run on Tuesday 2026-11-24, another agent and tenant at the same minute, and Wednesday ---
ESC=$(printf '\033')
HEAD=$(py_append "$STATE" <<EOF
["2026-11-24T18:02:59.999Z", "r1", "acme", "agent-7", "run_start", {"tenant": "acme", "agent": "agent-7", "agent_version": "3", "image": "minimal", "image_digest": "sha256:1111111111111111111111111111111111111111111111111111111111111111", "policy_name": "default", "policy_hash": "2222222222222222222222222222222222222222222222222222222222222222", "manifest_hash": "3333333333333333333333333333333333333333333333333333333333333333", "limits": {}}]
["2026-11-24T18:03:00.000Z", "r1", "acme", "agent-7", "step_start", {"step": 1, "kind": "script", "text": "pandoc report.md -o /workspace/out/report.pdf\\necho 100% done \\u001b[31mred", "size": 60, "sha256": "4444444444444444444444444444444444444444444444444444444444444444", "inputs": {}}]
["2026-11-24T18:03:59.999Z", "r1", "acme", "agent-7", "artifact", {"step": 1, "path": "report.pdf", "size": 12345, "digest": "sha256:5555555555555555555555555555555555555555555555555555555555555555", "redactions": {"aws_key": 1}}]
["2026-11-24T18:04:00.000Z", "r1", "acme", "agent-7", "run_end", {"result": "success", "steps": 1, "cpu_seconds": 0.5, "memory_gib_seconds": 0.01, "stored_bytes": 12345}]
["2026-11-24T18:03:30.000Z", "r2", "acme", "agent-8", "step_start", {"step": 1, "kind": "command", "text": "ls -la", "size": 6, "sha256": "66", "inputs": {}}]
["2026-11-24T18:03:30.000Z", "r3", "globex", "agent-7", "step_start", {"step": 1, "kind": "command", "text": "ls a_b", "size": 6, "sha256": "77", "inputs": {}}]
["2026-11-25T09:00:00.000Z", "r4", "acme", "agent-7", "step_start", {"step": 1, "kind": "command", "text": "echo O'Brien", "size": 12, "sha256": "88", "inputs": {}}]
EOF
)
run_rbx ledger verify
if [ "$RC" = 0 ] && [ "$OUT" = "ledger intact: 7 events, head $HEAD" ]; then
	ok "verify agrees with an independent implementation of the documented chain"
else not_ok "verify agrees with an independent implementation of the documented chain" "exit $RC: $(first_line "$OUT$ERR") (want head $HEAD)"; fi

# --- show ---
run_rbx ledger show r1
if [ "$RC" = 0 ] && grep -q 'run_start' <<<"$OUT" && grep -q 'step_start.*pandoc report.md' <<<"$OUT" &&
	grep -q 'artifact.*report.pdf' <<<"$OUT" && grep -q 'run_end.*result success' <<<"$OUT" && ! grep -q r2 <<<"$OUT"; then
	ok "show lists the run's events with summaries"
else not_ok "show lists the run's events with summaries" "exit $RC: $(tr '\n' '|' <<<"$OUT$ERR" | cut -c 1-300)"; fi
if grep -q "$ESC" "$T/out"; then not_ok "show escapes terminal control characters" "a raw ESC was printed"
elif grep -qF '\x1b[31m' "$T/out"; then ok "show escapes terminal control characters"
else not_ok "show escapes terminal control characters" "no escaped \\x1b in: $(grep pandoc "$T/out")"; fi
run_rbx ledger show r1 --json
got=$(seqs "$T/out" 2>&1)
text=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[1]["data"]["text"])' "$T/out" 2>&1)
if [ "$RC" = 0 ] && [ "$got" = "1,2,3,4" ] && [ "$text" = "pandoc report.md -o /workspace/out/report.pdf
echo 100% done ${ESC}[31mred" ]; then ok "show --json gives the raw events, the exact script text"
else not_ok "show --json gives the raw events, the exact script text" "exit $RC, seqs [$got], text: $text"; fi
expect125 "show of an unknown run gives 125 and one line" show no-such-run

# --- query: "what did agent-7 of acme run on Tuesday at 18:03" ---
expect_seqs "query by tenant, agent and minute" 2,3 --tenant acme --agent agent-7 --since 2026-11-24T18:03 --until 2026-11-24T18:03
expect_seqs "query by tenant" 1,2,3,4,5,7 --tenant acme
expect_seqs "query by agent" 1,2,3,4,6,7 --agent agent-7
expect_seqs "query by run and type" 2 --run r1 --type step_start
expect_seqs "query --since with an offset" 7 --since 2026-11-25T10:00+01:00
expect_seqs "query --until a day" 1,2,3,4,5,6 --until 2026-11-24
expect_seqs "query --grep is a substring" 2 --grep pandoc
expect_seqs "query --grep % is literal" 2 --grep '%'
expect_seqs "query --grep _ is literal" 6 --grep 'a_b'
expect_seqs "query --grep with a quote" 7 --grep "O'Brien"
expect_seqs "query --grep is case-sensitive" "" --grep PANDOC
expect_seqs "query --limit" 1,2 --tenant acme --limit 2
run_rbx ledger query --tenant acme --agent agent-7 --since 2026-11-24T18:03 --until 2026-11-24T18:03
if [ "$RC" = 0 ] && grep -q '^SEQ' <<<"$OUT" && grep -q '(2 events)' <<<"$OUT" && grep -q 'pandoc' <<<"$OUT"; then
	ok "query prints a readable table"
else not_ok "query prints a readable table" "exit $RC: $(tr '\n' '|' <<<"$OUT$ERR" | cut -c 1-300)"; fi

# --- export ---
run_rbx ledger export --jsonl
got=$("$PY" -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
print(len(ev), ev[-1]["hash"], all(e["seq"] == i + 1 for i, e in enumerate(ev)))' "$T/out" 2>&1)
if [ "$RC" = 0 ] && [ "$got" = "7 $HEAD True" ]; then ok "export --jsonl writes every event, one per line"
else not_ok "export --jsonl writes every event, one per line" "exit $RC: $got"; fi

# --- usage errors ---
expect125 "an unknown subcommand gives 125 and one line" frobnicate
expect125 "an option that does not apply gives 125" verify --grep x
expect125 "a bad --since gives 125" query --since Tuesday
expect125 "a bad --limit gives 125" query --limit -3
expect125 "export without --jsonl gives 125" export

# --- tampering with the sqlite3 tool: each on a copy, each against the intact original ---
copy() { rm -rf "${T:?}/$1" && cp -a "$STATE" "$T/$1"; }
# expect_broken NAME COPY WANT-LINE-PREFIX
expect_broken() {
	run_rbx ledger --state-dir "$T/$2" verify
	if [ "$RC" = 1 ] && [[ "$OUT" == "$3"* ]]; then ok "$1"
	else not_ok "$1" "exit $RC: $(first_line "$OUT$ERR"), want: $3..."; fi
}

copy guarded
if sql "$T/guarded/ledger.db" "UPDATE events SET data='{}' WHERE seq=2" >/dev/null 2>&1; then
	not_ok "the triggers refuse an UPDATE" "the UPDATE went through"
else ok "the triggers refuse an UPDATE"; fi
if sql "$T/guarded/ledger.db" "DELETE FROM events WHERE seq=2" >/dev/null 2>&1; then
	not_ok "the triggers refuse a DELETE" "the DELETE went through"
else ok "the triggers refuse a DELETE"; fi

copy edited
sql "$T/edited/ledger.db" "DROP TRIGGER events_no_update; UPDATE events SET data='{\"step\":1,\"kind\":\"script\",\"text\":\"true\"}' WHERE seq=2"
expect_broken "verify detects an event edited with the sqlite3 tool" edited "ledger BROKEN at seq 2:"
run_rbx ledger --state-dir "$T/edited" verify --json
if [ "$RC" = 1 ] && [ "$(json "$T/out" intact)" = false ] && [ "$(json "$T/out" first_bad_seq)" = 2 ]; then
	ok "verify --json names the first bad seq"
else not_ok "verify --json names the first bad seq" "exit $RC: $(tr '\n' ' ' <<<"$OUT")"; fi

copy middle
sql "$T/middle/ledger.db" "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq=3"
expect_broken "verify detects an event deleted from the middle" middle "ledger BROKEN at seq 3:"

copy last
sql "$T/last/ledger.db" "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq=7"
expect_broken "verify detects an event deleted from the end (head file)" last "ledger BROKEN at seq 7:"

copy nohead
rm -f "$T/nohead/ledger.head"
expect_broken "verify detects a removed head file" nohead "ledger BROKEN:"

# the original, untouched, is still intact (the control for all of the above)
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the untouched ledger still verifies"; else not_ok "the untouched ledger still verifies" "$(first_line "$OUT$ERR")"; fi

# --- runs record themselves ---
sb --json -- /bin/true
run_id=$(json "$T/out" run_id 2>/dev/null)
if [ -z "$run_id" ]; then
	not_ok "a run is recorded in the ledger" "runbox run failed (exit $RC: $(first_line "$ERR"))"
else
	run_rbx ledger show "$run_id" --json
	if [ "$RC" = 0 ] && grep -q '"run_start"' "$T/out" && grep -q '"run_end"' "$T/out"; then
		ok "a run is recorded in the ledger"
		run_rbx ledger verify
		if [ "$RC" = 0 ]; then ok "the chain stays intact across runbox's own appends"
		else not_ok "the chain stays intact across runbox's own appends" "$(first_line "$OUT$ERR")"; fi
		# runbox returns only once its last commit is synced, which then moves the head file
		# to it (the fsync overlaps the teardown): the head names the run's own run_end.
		head_line=$(cat "$STATE/ledger.head" 2>/dev/null)
		last=$("$PY" - "$STATE/ledger.db" "$run_id" <<'PYEOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
seq, h, run, typ = c.execute("SELECT seq, hash, run_id, type FROM events ORDER BY seq DESC LIMIT 1").fetchone()
print("%020d %s" % (seq, h) if (run, typ) == (sys.argv[2], "run_end") else "last event: %s %s" % (run, typ))
PYEOF
)
		if [ -n "$head_line" ] && [ "$head_line" = "$last" ]; then ok "when runbox returns, the head file names the run's run_end"
		else not_ok "when runbox returns, the head file names the run's run_end" "head '$head_line', table '$last' ($(first_line "$ERR"))"; fi
	else
		not_ok "a run is recorded in the ledger" "exit $RC: $(first_line "$OUT$ERR")"
	fi
fi

# --- another run's commit holding the ledger does not hold a step past its deadline ---
# A step's record is committed beside its start; if another process holds the write lock, the
# commit is not waited for (the events stay written ahead) and the timeout still fires on time.
# The lock is held 2 s; the step's timeout is 300 ms. The control: the run as a whole lasts
# the 2 s, since its final commit must wait for the lock, and then records the step in full.
as_mode() { if [ "$MODE" = root ]; then "$@"; else as_nobody "$@"; fi; }
lock_out=$T/lock.out
as_mode "$PY" -c 'import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(2)
db.execute("COMMIT")' "$STATE/ledger.db" >"$lock_out" 2>&1 &
locker=$!
for _ in $(seq 50); do grep -q locked "$lock_out" && break; sleep 0.1; done
t0=$(date +%s%N)
sb --timeout 300ms --json -- /bin/probe sleep-forever
t1=$(date +%s%N)
wait "$locker"
wall=$(json "$T/out" wall_ms 2>/dev/null | cut -d. -f1)
run_id=$(json "$T/out" run_id 2>/dev/null)
if ! grep -q locked "$lock_out"; then
	skip "a held ledger does not hold a step past its timeout" "control: the lock was not taken: $(head -c 200 "$lock_out")"
elif [ "$RC" = 124 ] && [ -n "$wall" ] && [ "$wall" -lt 1500 ]; then
	ok "a held ledger does not hold a step past its timeout (step ${wall} ms, exit 124)"
else not_ok "a held ledger does not hold a step past its timeout" "exit $RC, step ${wall:-?} ms"; fi
elapsed=$(((t1 - t0) / 1000000))
run_rbx ledger show "$run_id" --json
if [ "$elapsed" -ge 1500 ] && grep -q '"step_start"' "$T/out" && grep -q '"step_end"' "$T/out" &&
	grep -q '"run_end"' "$T/out"; then
	ok "control: the run waited for the lock at its end (${elapsed} ms) and recorded the step in full"
else not_ok "control: the run waited for the lock at its end and recorded the step in full" "${elapsed} ms: $(first_line "$OUT$ERR")"; fi

# --- a run whose last commit the ledger refuses leaves its events for gc ---
# A trigger refuses run_end (the run's last commit: step_end and run_end together). runbox
# exits 125 and keeps its state file with the two events written ahead; once the ledger takes
# writes again, gc commits them, the run's own end and not "abandoned". The control: a run
# before the trigger leaves no state file.
sb -- /bin/true
left=$(find "$STATE/run" -maxdepth 1 -name '*.state' 2>/dev/null | wc -l)
as_mode "$PY" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
db.execute("CREATE TRIGGER rbx_test_refuse_end BEFORE INSERT ON events WHEN NEW.type = \"run_end\" "
           "BEGIN SELECT RAISE(ABORT, \"test: refused\"); END")
db.commit()' "$STATE/ledger.db"
sb --json -- /bin/probe exit 0
rc=$RC
run_id=$(json "$T/out" run_id 2>/dev/null)
kept=$(find "$STATE/run" -maxdepth 1 -name "$run_id.state" 2>/dev/null | wc -l)
as_mode "$PY" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.execute("DROP TRIGGER rbx_test_refuse_end"); db.commit()' "$STATE/ledger.db"
if [ "$left" != 0 ]; then
	not_ok "a refused last commit keeps the run's events for gc" "control: a normal run left $left state files"
elif [ "$rc" = 125 ] && [ "$kept" = 1 ] && grep -q "runbox gc" <<<"$ERR"; then
	ok "a refused last commit keeps the run's events for gc (exit 125, state file kept)"
else not_ok "a refused last commit keeps the run's events for gc" "exit $rc, $kept state files: $(first_line "$ERR")"; fi
run_rbx ps
if grep -q "$run_id.*unrecorded" <<<"$OUT"; then ok "runbox ps shows the run as unrecorded"
else not_ok "runbox ps shows the run as unrecorded" "$(grep "$run_id" <<<"$OUT")"; fi
# A gc whose own commit is refused keeps the state file and records nothing; the next records
# once.
sql_mode() { as_mode "$PY" -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1]); db.execute(sys.argv[2]); db.commit()' "$STATE/ledger.db" "$1"; }
sql_mode 'CREATE TRIGGER rbx_test_refuse_cleanup BEFORE INSERT ON events WHEN NEW.type = "cleanup"
	BEGIN SELECT RAISE(ABORT, "test: refused"); END'
run_rbx gc
gc1=$OUT
kept=$(find "$STATE/run" -maxdepth 1 -name "$run_id.state" 2>/dev/null | wc -l)
sql_mode 'DROP TRIGGER rbx_test_refuse_cleanup'
if [ "$kept" = 1 ] && grep -q "$run_id: not finished, kept for the next gc:.*refused" <<<"$gc1"; then
	ok "a gc whose commit is refused keeps the state file for the next"
else not_ok "a gc whose commit is refused keeps the state file for the next" "$kept kept: $(first_line "$gc1")"; fi
run_rbx gc
gc2=$OUT
run_rbx ledger show "$run_id" --json
types=$(grep -o '"type": *"[a-z_]*"' <<<"$OUT" | tr -d ' ' | sed 's/"type"://; s/"//g' | paste -sd,)
if [ "$types" = "run_start,step_start,step_end,run_end,cleanup" ] && grep -q '"result": *"success"' <<<"$OUT" &&
	! grep -q abandoned <<<"$OUT" && grep -q "$run_id: cleaned up, recorded as its own end" <<<"$gc2"; then
	ok "gc commits the refused end as the run's own (success), once, not an abandonment"
else not_ok "gc commits the refused end as the run's own" "events: $types; gc: $(first_line "$gc2")"; fi
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the chain is intact after gc's commit"; else not_ok "the chain is intact after gc's commit" "$(first_line "$OUT$ERR")"; fi

# --- a run id is one run's: a manifest cannot reuse one already in the ledger ---
# dup_manifest FILE TENANT RUN_ID MARK: a one-step manifest naming RUN_ID.
dup_manifest() {
	printf '{"tenant": "%s", "agent": "a1", "run_id": "%s", "image": "minimal",
 "steps": [{"script": "echo %s"}]}\n' "$2" "$3" "$4" >"$1"
}
dup_id=dup$(printf '%05x%05x' $RANDOM $RANDOM)
dup_manifest "$T/dup-first.json" acme "$dup_id" first-run
run_rbx run "$T/dup-first.json" --json
if [ "$RC" = 0 ]; then ok "control: a manifest with a new run_id runs (exit 0)"
else not_ok "control: a manifest with a new run_id runs (exit 0)" "exit $RC: $(first_line "$ERR")"; fi
dup_manifest "$T/dup-second.json" intruder "$dup_id" second-run
run_rbx run "$T/dup-second.json" --json
dup_rc=$RC dup_err=$ERR
run_rbx ledger show "$dup_id" --json
if [ "$dup_rc" = 125 ] && grep -q "already in the ledger" <<<"$dup_err" && ! grep -q intruder <<<"$OUT" &&
	! grep -q second-run <<<"$OUT" && grep -q first-run <<<"$OUT"; then
	ok "a manifest reusing a run id in the ledger is refused (exit 125), nothing recorded under it"
else not_ok "a manifest reusing a run id in the ledger is refused" "exit $dup_rc: $(first_line "$dup_err"); intruder in the record: $(grep -c intruder <<<"$OUT")"; fi
# Two runs started at once with one new id: exactly one gets in, whichever passes the early
# check; the other is refused at its first commit, under the ledger's write lock. Each has a
# run directory of its own (RUNBOX_RUN_DIR), so that the run directory named after the id
# does not keep them apart first (as the run's cgroup does where runbox makes one).
race_id=race$(printf '%05x%05x' $RANDOM $RANDOM)
# race_bg N: starts runbox on $T/race-N.json with run directory $T/rd-N in the background.
race_bg() {
	mkdir -p "$T/rd-$1"
	[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/rd-$1"
	rbx_cmd run "$T/race-$1.json" --json
	local i
	for i in "${!RBX_CMD[@]}"; do
		[ "${RBX_CMD[$i]}" = "XDG_RUNTIME_DIR=$T/xdg" ] && RBX_CMD[$i]="RUNBOX_RUN_DIR=$T/rd-$1"
	done
	"${RBX_CMD[@]}" </dev/null >"$T/race-$1.out" 2>"$T/race-$1.err" &
}
dup_manifest "$T/race-1.json" tenant-one "$race_id" race-one
dup_manifest "$T/race-2.json" tenant-two "$race_id" race-two
race_bg 1
p1=$!
race_bg 2
p2=$!
wait $p1
r1=$?
wait $p2
r2=$?
run_rbx ledger show "$race_id" --json
tenants=$(grep -o '"tenant": *"tenant-[a-z]*"' <<<"$OUT" | sort -u | wc -l)
# (Where runbox makes cgroups, the second run may instead fail on the first's cgroup, and
# record its failure under the id first: then the first is refused. Either way one run's
# record, and never two exits 0.)
if [ "$tenants" = 1 ] && { [ "$r1" = 125 ] || [ "$r2" = 125 ]; } && [ "$r1$r2" != 00 ]; then
	ok "two runs started at once with one run id: one run's record, the other exits 125 (exits $r1, $r2)"
else not_ok "two runs started at once with one run id: one run's record" "exits $r1 and $r2, $tenants tenants recorded"; fi
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "the chain is intact after the refused runs"; else not_ok "the chain is intact after the refused runs" "$(first_line "$OUT$ERR")"; fi
left=$(find "$STATE/run" -maxdepth 1 -name '*.state' 2>/dev/null | wc -l)
if [ "$left" = 0 ]; then ok "refused runs leave no state file for gc"
else not_ok "refused runs leave no state file for gc" "$left left"; fi

# --- an artifact's name cannot hide its size and digest in `show` ---
# A name chosen inside the sandbox that imitates the summary (", 12.1 KiB, sha256:…") and pads
# past the 200-column cut: the real size and digest come before the name, which is quoted.
# Control: an ordinary name, and a name with a quote and a backslash, escaped.
SP=$T/spoof
mkdir -p "$SP"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$SP"
# sp_rbx ARGS...: runbox with the state directory $SP; sets RC and $T/out.
sp_rbx() {
	rbx_cmd "$@"
	local i
	for i in "${!RBX_CMD[@]}"; do [ "${RBX_CMD[$i]}" = "RUNBOX_STATE_DIR=$STATE" ] && RBX_CMD[$i]="RUNBOX_STATE_DIR=$SP"; done
	"${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
}
sp_rbx ledger query # an empty ledger to append to
pad=$(printf '%170s' '')
as_mode "$PY" -c "$PY_APPEND" "$SP" >/dev/null <<EOF
["2026-11-24T18:03:59.999Z", "sp1", "acme", "agent-7", "artifact", {"step": 1, "path": "report.pdf, 12.1 KiB, sha256:5f2e8a1b0c3d$pad", "size": 1000000, "digest": "sha256:dead000000000000000000000000000000000000000000000000000000000000", "redactions": {}}]
["2026-11-24T18:04:00.000Z", "sp1", "acme", "agent-7", "artifact", {"step": 1, "path": "plain.txt", "size": 5, "digest": "sha256:beef000000000000000000000000000000000000000000000000000000000000", "redactions": {}}]
["2026-11-24T18:04:01.000Z", "sp1", "acme", "agent-7", "artifact", {"step": 1, "path": "a\\"b\\\\c", "size": 5, "digest": "sha256:cafe000000000000000000000000000000000000000000000000000000000000", "redactions": {}}]
EOF
sp_rbx ledger show sp1
spoof=$(grep -m1 'sha256:dead\|5f2e8a1b0c3d' "$T/out")
plain=$(grep -m1 'plain.txt' "$T/out")
quoted=$(grep -m1 'cafe' "$T/out")
if [ "$RC" = 0 ] && [[ "$spoof" == *'976.6 KiB, sha256:dead'*'"report.pdf, 12.1 KiB, sha256:5f2e8a1b0c3d'* ]]; then
	ok "show prints an artifact's real size and digest before its (quoted) name"
else not_ok "show prints an artifact's real size and digest before its (quoted) name" "exit $RC: $(cut -c 1-220 <<<"$spoof")"; fi
if [[ "$plain" == *'5 B, sha256:beef'*', "plain.txt"'* ]] && [[ "$quoted" == *'"a\"b\\c"'* ]]; then
	ok "control: ordinary names show quoted after size and digest; quotes and backslashes escaped"
else not_ok "control: ordinary names show quoted after size and digest" "$plain | $quoted"; fi
