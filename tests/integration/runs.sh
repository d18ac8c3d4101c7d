#!/usr/bin/env bash
# Manifest runs end to end (issue 5, item 7), each check against a control: three steps in one
# sandbox with a skill; planted secrets of every format and the run token in every encoding
# absent from the stored artifacts while ordinary text is untouched; hostile /workspace/out
# contents (links to /etc/shadow, a fifo, a device node, 100,000 files, a 2 GB sparse file, a
# 1,000-deep tree); ledger verify before and after an edit; ledger query for one step's exact
# script and its artifact; 50 concurrent runs on one ledger; SIGTERM mid-step.
# modes: root user subids
. "$(dirname "$0")/../lib.sh"
lib_init runs

FIX=$ROOT/tests/integration/fixtures/runs

# new_state NAME: a fresh state directory $T/NAME, owned by the mode's user, becomes STATE.
new_state() {
	STATE=$T/$1
	mkdir -p "$STATE"
	[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$STATE"
}

# obj DIGEST: the store's path of an artifact ("sha256:<hex>").
obj() {
	local h=${1#sha256:}
	echo "$STATE/artifacts/sha256/${h:0:2}/$h"
}

# got_result NAME: not ok (and returns 1) unless $T/out holds a JSON result.
got_result() {
	if rj 'r["result"]' >/dev/null; then return 0; fi
	not_ok "$1" "no result (exit $RC; $(first_line "$ERR"))"
	return 1
}

# ---------------------------------------------------------------------------------------
# 1. Three steps in one sandbox: step 2 reads step 1's output, step 3 is a skill.
new_state state-a
run_manifest "$FIX/three-step.json"
if got_result "three-step run"; then
	check "three-step run: result success, exit 0" 'r["result"] == "success" and r["exit"] == 0 and len(r["steps"]) == 3' \
		'"result %s exit %s, %d steps, statuses %s" % (r["result"], r["exit"], len(r["steps"]), [s["status"] for s in r["steps"]])'
	if [ "$RC" = 0 ]; then ok "three-step run: runbox exits 0"; else not_ok "three-step run: runbox exits 0" "exit $RC"; fi
	check "three-step run: step 2 read step 1's file from /workspace/out" \
		'r["steps"][1]["stdout"] == "3\nALPHA\nBETA\nGAMMA\n"' 'repr(r["steps"][1]["stdout"])'
	check "three-step run: steps[2].result is the skill's JSON object" \
		'r["steps"][2]["result"] == {"file": "/workspace/out/upper.txt", "lines": 3, "first": "ALPHA"}' \
		'"result %r, error %r" % (r["steps"][2].get("result"), r["steps"][2].get("error"))'
fi
RUN_A=$(rj 'r["run_id"]')
# Control: step 2 reads a file step 1 never wrote: the run fails there, step 3 never runs.
run_manifest "$FIX/three-step-missing.json"
if got_result "three-step control"; then
	check "three-step control: a missing file fails step 2 and step 3 never runs" \
		'r["result"] == "failure" and len(r["steps"]) == 2 and r["steps"][0]["status"] == "success" and r["steps"][1]["status"] == "failure" and r["exit"] != 0' \
		'"result %s, %d steps %s" % (r["result"], len(r["steps"]), [s["status"] for s in r["steps"]])'
	if [ "$RC" != 0 ] && [ "$RC" != 125 ]; then ok "three-step control: runbox exits with the step's failure ($RC)"
	else not_ok "three-step control: runbox exits with the step's failure" "exit $RC"; fi
fi

# ---------------------------------------------------------------------------------------
# 4. The ledger: intact after runs; one event edited with the sqlite3 tool breaks it.
run_rbx ledger verify
if [ "$RC" = 0 ] && [[ "$OUT" == "ledger intact: "* ]]; then ok "ledger verify passes after the runs"
else not_ok "ledger verify passes after the runs" "exit $RC: $(first_line "$OUT$ERR")"; fi

if ! command -v sqlite3 >/dev/null; then
	skip "ledger: an edited event is detected" "the sqlite3 tool is missing"
else
	A=$STATE
	# Copies of the files (no runbox is running, so the files are consistent); never open
	# the live ledger as root, which would leave root-owned -wal/-shm files behind.
	for c in copy-ok copy-bad; do
		mkdir -p "$T/$c"
		cp -p "$A"/ledger.db* "$A/ledger.head" "$T/$c/"
	done
	seq=$(sqlite3 "$T/copy-bad/ledger.db" "SELECT seq FROM events WHERE run_id='$RUN_A' AND type='step_start' ORDER BY seq LIMIT 1")
	# With its triggers, the table refuses the edit (defence in depth); dropped, it is done.
	if [ -z "$seq" ]; then
		not_ok "ledger: the no-update trigger refuses an UPDATE" "no step_start event of run '$RUN_A' in the ledger"
	elif sqlite3 "$T/copy-bad/ledger.db" "UPDATE events SET data=replace(data,'alpha','omega') WHERE seq=$seq" 2>/dev/null; then
		not_ok "ledger: the no-update trigger refuses an UPDATE" "the UPDATE of seq $seq went through"
	else ok "ledger: the no-update trigger refuses an UPDATE"; fi
	changed=$(sqlite3 "$T/copy-bad/ledger.db" "DROP TRIGGER events_no_update; UPDATE events SET data=replace(data,'alpha','omega') WHERE seq=$seq; SELECT changes(); SELECT instr(data,'omega')>0 FROM events WHERE seq=$seq;" 2>&1 | tr '\n' ' ')
	[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$T/copy-ok" "$T/copy-bad"
	STATE=$T/copy-ok
	run_rbx ledger verify
	if [ "$RC" = 0 ] && [[ "$OUT" == "ledger intact: "* ]]; then ok "ledger control: an untouched copy verifies"
	else not_ok "ledger control: an untouched copy verifies" "exit $RC: $(first_line "$OUT$ERR")"; fi
	STATE=$T/copy-bad
	run_rbx ledger verify
	if [ "$changed" != "1 1 " ]; then
		not_ok "ledger: verify fails after one event is edited" "the edit did not happen (seq '$seq', sqlite3 says '$changed')"
	elif [ "$RC" = 1 ] && [[ "$OUT$ERR" == *"BROKEN at seq $seq:"* ]]; then
		ok "ledger: verify fails after one event is edited, naming seq $seq"
	else not_ok "ledger: verify fails after one event is edited" "exit $RC, want 1 naming seq $seq: $(first_line "$OUT$ERR")"; fi
	STATE=$A
fi

# ---------------------------------------------------------------------------------------
# 5. "What did agent X of tenant Y run at 18:03?": query by tenant, agent, time and text.
MARK=$(new_marker)
QRUN=q$$r$RANDOM$RANDOM
sed -e "s/@MARK@/$MARK/g" -e "s/@RUN@/$QRUN/g" "$FIX/query.json" >"$T/query.json"
SINCE=$(date -u +%Y-%m-%dT%H:%M)
run_manifest "$T/query.json"
UNTIL=$(date -u +%Y-%m-%dT%H:%M)
if [ "$RC" != 0 ]; then
	not_ok "ledger query: the run" "exit $RC: $(first_line "$ERR")"
else
	run_rbx ledger query --tenant acme --agent agent-7 --since "$SINCE" --until "$UNTIL" --grep "$MARK" --json
	q=$("$PY" - "$T/out" "$T/query.json" "$QRUN" "$MARK" "$STATE" <<'EOF'
import json, os, sys
ev = json.load(open(sys.argv[1]))
script = json.load(open(sys.argv[2]))["steps"][0]["script"]
run, mark, state = sys.argv[3], sys.argv[4], sys.argv[5]
starts = [e for e in ev if e["type"] == "step_start" and e["run_id"] == run and e["data"]["text"] == script]
arts = [e for e in ev if e["type"] == "artifact" and e["run_id"] == run and e["data"]["path"] == mark + ".txt"]
others = [e for e in ev if e["run_id"] != run]
if not starts:
    print("no step_start with the exact script among %s" % [(e["type"], e["run_id"]) for e in ev])
elif not arts:
    print("no artifact event for %s.txt among %s" % (mark, [(e["type"], e["data"].get("path")) for e in ev]))
elif others:
    print("events of other runs: %s" % [e["run_id"] for e in others])
else:
    h = arts[0]["data"]["digest"].split(":")[1]
    p = os.path.join(state, "artifacts", "sha256", h[:2], h)
    want = ("weekly report %s\n" % mark).encode()
    print("ok" if os.path.isfile(p) and open(p, "rb").read() == want else "the artifact's digest names no stored object with its content")
EOF
	)
	if [ "$RC" != 0 ]; then not_ok "ledger query finds the exact script and the artifact" "exit $RC: $(first_line "$ERR")"
	elif [ "$q" = ok ]; then ok "ledger query --tenant --agent --since --until --grep finds the exact script and the artifact of the run"
	else not_ok "ledger query finds the exact script and the artifact" "$q"; fi
	run_rbx ledger query --tenant acme --agent agent-7 --since "$SINCE" --grep "$MARK"
	if [ "$RC" = 0 ] && grep -q "step_start.*$MARK" "$T/out" && grep -q "artifact.*$MARK" "$T/out"; then
		ok "ledger query: the readable table shows the step and the artifact"
	else not_ok "ledger query: the readable table shows the step and the artifact" "exit $RC: $(head -c 300 "$T/out")"; fi
	# Controls: another agent, or a span after the run, finds nothing.
	run_rbx ledger query --tenant acme --agent agent-8 --since "$SINCE" --grep "$MARK" --json
	n1=$(rj 'len(r)')
	run_rbx ledger query --tenant acme --agent agent-7 --since "$(date -u -d '+2 hours' +%Y-%m-%dT%H:%M)" --grep "$MARK" --json
	n2=$(rj 'len(r)')
	if [ "$n1" = 0 ] && [ "$n2" = 0 ]; then ok "ledger query control: another agent or a later span finds nothing"
	else not_ok "ledger query control: another agent or a later span finds nothing" "other agent: '$n1' events, later span: '$n2'"; fi
fi

# ---------------------------------------------------------------------------------------
# 2. Planted secrets.
new_state state-b
run_manifest "$FIX/secrets.json"
if got_result "planted secrets"; then
	check "planted secrets: the run succeeds" 'r["result"] == "success"' '"result %s, steps %s" % (r["result"], [(s["status"], s.get("stderr")) for s in r["steps"]])'
	pl=$("$PY" - "$T/out" "$STATE" "$FIX/ordinary.txt" <<'EOF'
import hashlib, json, os, sys
r = json.load(open(sys.argv[1]))
state = sys.argv[2]
ordinary = open(sys.argv[3], "rb").read()
def obj(d):
    h = d.split(":")[1]
    return os.path.join(state, "artifacts", "sha256", h[:2], h)
def line(name, good, why=""):
    print("%s\t%s\t%s" % ("ok" if good else "not_ok", name, why))
step = r["steps"][0]
arts = {a["path"]: a for a in step["harvest"]["artifacts"]}
if not all(p in arts for p in ("planted.txt", "planted.rot", "plain.txt")):
    line("planted secrets: all three files are harvested", False, "artifacts: %s" % sorted(arts))
    sys.exit(0)
# What was planted, from the rot13 transport file (no rule matches its lines).
rot = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                      b"NOPQRSTUVWXYZABCDEFGHIJKLMnopqrstuvwxyzabcdefghijklm5678901234")
ta = arts["planted.rot"]
planted = {}
pem = []
for l in open(obj(ta["digest"]), "rb").read().translate(rot).decode().splitlines():
    k, v = l.split(" ", 1)
    if k == "pem_line":
        pem.append(v)
    else:
        planted[k] = v
tok = planted.get("token", "")
line("planted secrets control: the transport file arrived untouched with every value",
     ta["redaction_count"] == 0 and tok.startswith("rbx1.") and len(planted) == 16 and len(pem) >= 4,
     "redactions %s, %d values, token starts %r" % (ta["redactions"], len(planted), tok[:5]))
for i, v in enumerate(pem):
    planted["pem line %d" % (i + 1)] = v
a = arts["planted.txt"]
stored = open(obj(a["digest"]), "rb").read()
present = [k for k, v in planted.items() if v.encode() in stored]
line("planted secrets: no planted value (%d of them) is in the stored artifact" % len(planted), not present,
     "still there: %s" % present)
off = [l for l in stored.decode("utf-8", "replace").splitlines() if l.startswith("run base64 at an offset ")]
line("planted secrets: the token in base64 at an unaligned offset is redacted",
     len(off) == 1 and "[REDACTED:exact:run-token:base64" in off[0], "stored line %r" % [l[:60] for l in off])
line("planted secrets: the ordinary text is there byte for byte, before and after",
     stored.startswith(ordinary) and stored.endswith(ordinary), "stored starts %r" % stored[:80])
want = {"aws-access-key-id", "github-pat", "github-fine-grained-pat", "gitlab-pat", "slack-token", "stripe-key",
        "gcp-api-key", "private-key", "jwt", "exact:run-token:raw", "exact:run-token:base64", "exact:run-token:hex"}
# Forms that differ from the raw (or base64) bytes get rules of their own.
if planted["tok_b64url"] not in (planted["tok_b64"], planted["tok_b64"].rstrip("=")):
    want.add("exact:run-token:base64url")
if planted["tok_url"] != tok:
    want.add("exact:run-token:url")
if planted["tok_json"] != tok:
    want.add("exact:run-token:json")
red = a["redactions"]
missing = sorted(w for w in want if not red.get(w))
line("planted secrets: the result lists the redactions by rule", not missing and a["redaction_count"] == sum(red.values()),
     "missing rules %s; redactions %s" % (missing, red))
# Controls: the file as written (sha256 printed in the sandbox before harvest) differs from
# what was stored; a file without secrets is stored exactly as written.
sums = dict(reversed(l.split()) for l in step["stdout"].splitlines() if len(l.split()) == 2)
line("planted secrets control: the file as written (sha256 in the sandbox) is not what was stored",
     sums.get("planted.txt") and "sha256:" + sums["planted.txt"] != a["digest"] and a["original_size"] > a["size"],
     "sandbox sha256 %s, stored %s" % (sums.get("planted.txt"), a["digest"]))
p = arts["plain.txt"]
line("planted secrets control: a file without secrets is stored with an unchanged digest",
     "sha256:" + sums.get("plain.txt", "") == p["digest"] == "sha256:" + hashlib.sha256(ordinary).hexdigest()
     and open(obj(p["digest"]), "rb").read() == ordinary and p["redaction_count"] == 0,
     "sandbox %s, stored %s, redactions %s" % (sums.get("plain.txt"), p["digest"], p["redactions"]))
# The token echoed by step 2 shows redacted; it is nowhere in the result.
s2 = r["steps"][1]
line("planted secrets: the run token echoed to stdout and stderr shows redacted",
     s2["stdout"] == "token in stdout: [REDACTED:exact:run-token:raw]\n"
     and s2["stderr"] == "token on stderr: [REDACTED:exact:run-token:raw]\n", "stdout %r" % s2["stdout"][:40])
line("planted secrets: the run token is nowhere in the result", tok and tok not in open(sys.argv[1]).read())
print("TOKEN\t%s" % tok)
EOF
	)
	report "$pl"
	[ -n "$pl" ] || not_ok "planted secrets: checks" "the checker printed nothing"
	# Nor in the ledger (it holds scripts and digests, never output).
	run_rbx ledger export --jsonl
	if [ "$RC" = 0 ] && [ -n "${TOKEN:-}" ] && ! grep -qF "$TOKEN" "$T/out"; then ok "planted secrets: the run token is not in the ledger"
	else not_ok "planted secrets: the run token is not in the ledger" "export exit $RC, token known: ${TOKEN:+yes}"; fi
fi

# ---------------------------------------------------------------------------------------
# 3. Hostile /workspace/out contents: the run finishes, the caps hold, nothing is followed.
new_state state-c

# hostile NAME FILE SECONDS: runs FILE; ok when it finished with a result, exit 0 and a
# complete harvest; returns 1 otherwise.
hostile() {
	run_manifest "$2" "$3"
	if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
		not_ok "$1: the run finishes" "killed by timeout after $3 s"
		return 1
	fi
	got_result "$1: the run finishes" || return 1
	local why
	why=$(rj '"OK" if r["result"] == "success" and r["exit"] == 0 and all(s["harvest"].get("complete") for s in r["steps"]) else "result %s exit %s, harvest %s, stderr %r" % (r["result"], r["exit"], [s["harvest"].get("complete", s["harvest"].get("error")) for s in r["steps"]], r["steps"][-1]["stderr"][:200])')
	if [ "$RC" = 0 ] && [ "$why" = OK ]; then ok "$1: the run finishes (success, complete harvest)"
	else not_ok "$1: the run finishes" "exit $RC; $why"; return 1; fi
}

# 3a. Symlinks to /etc/shadow, /etc and / (also from a subdirectory).
if hostile "hostile symlinks" "$FIX/hostile-links.json" 60; then
	H='r["steps"][0]["harvest"]'
	check "hostile symlinks: each link is skipped as a symlink, the regular file stored" \
		"sorted((s['path'], s['reason']) for s in ${H}['skipped']) == [('etc', 'symlink'), ('root', 'symlink'), ('shadow', 'symlink'), ('sub/shadow', 'symlink'), ('sub/up', 'symlink')] and [a['path'] for a in ${H}['artifacts']] == ['regular.txt']" \
		"'skipped %s, artifacts %s' % ([(s['path'], s['reason']) for s in ${H}['skipped']], [a['path'] for a in ${H}['artifacts']])"
	if [ ! -r /etc/shadow ] || [ ! -s /etc/shadow ]; then
		skip "hostile symlinks: no line of the host's /etc/shadow is in the store" "the host's /etc/shadow is unreadable or empty"
	else
		leak=$("$PY" - "$STATE/artifacts" <<'EOF'
import os, sys
lines = [l for l in open("/etc/shadow", "rb").read().splitlines() if len(l) >= 8]
n = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        data = open(os.path.join(d, f), "rb").read()
        n += 1
        for l in lines:
            if l in data:
                print("object %s holds a line of /etc/shadow" % f)
                sys.exit(0)
print("ok %d %d" % (n, len(lines)))
EOF
		)
		if [[ "$leak" == "ok "* ]]; then ok "hostile symlinks: no line of the host's /etc/shadow (${leak#ok * } lines) is in the store"
		else not_ok "hostile symlinks: no line of the host's /etc/shadow is in the store" "$leak"; fi
	fi
fi

# 3b. A fifo: opening it for reading would block the harvest forever.
if hostile "hostile fifo" "$FIX/hostile-fifo.json" 60; then
	H='r["steps"][0]["harvest"]'
	check "hostile fifo: skipped as a fifo, the regular file stored" \
		"[(s['path'], s['reason']) for s in ${H}['skipped']] == [('pipe', 'fifo')] and [a['path'] for a in ${H}['artifacts']] == ['regular.txt']" \
		"'skipped %s, artifacts %s' % ([(s['path'], s['reason']) for s in ${H}['skipped']], [a['path'] for a in ${H}['artifacts']])"
fi

# 3c. Device nodes: a user namespace refuses a real device (c 1 3); the whiteout c 0 0 is
# allowed, and is a character device all the same.
if hostile "hostile device" "$FIX/hostile-device.json" 60; then
	H='r["steps"][0]["harvest"]'
	made=$(rj 'r["steps"][0]["stdout"]')
	for dev in whiteout null; do
		if grep -qx "$dev made" <<<"$made"; then
			check "hostile device: the device node $dev is skipped as a device" \
				"('$dev', 'device') in [(s['path'], s['reason']) for s in ${H}['skipped']] and '$dev' not in [a['path'] for a in ${H}['artifacts']]" \
				"'skipped %s, artifacts %s' % ([(s['path'], s['reason']) for s in ${H}['skipped']], [a['path'] for a in ${H}['artifacts']])"
		else
			skip "hostile device: the device node $dev" "the sandbox cannot mknod it ($(tr '\n' ' ' <<<"$made"| cut -c 1-80)): a user namespace may not create real device nodes"
		fi
	done
	check "hostile device control: the regular file beside it is stored" "[a['path'] for a in ${H}['artifacts']] == ['regular.txt']" \
		"[a['path'] for a in ${H}['artifacts']]"
fi

# 3d. 100,000 small files: the count cap holds and what is over it is counted.
nobj() { find "$STATE/artifacts" -type f 2>/dev/null | wc -l; }
before=$(nobj)
if hostile "hostile 100000 files" "$FIX/hostile-many.json" 300; then
	H='r["steps"][0]["harvest"]'
	check "hostile 100000 files control: the step made 100000 files" 'r["steps"][0]["stdout"].strip() == "100000"' 'r["steps"][0]["stdout"]'
	check "hostile 100000 files: max_files stored, every other file counted over_count_cap" \
		"${H}['files_seen'] == 100000 and ${H}['artifacts_total'] == ${H}['caps']['max_files'] and ${H}['skipped_by_reason'].get('over_count_cap') == 100000 - ${H}['caps']['max_files'] and ${H}['skipped_total'] == 100000 - ${H}['caps']['max_files']" \
		"'files_seen %s, artifacts %s, max_files %s, by reason %s, total %s' % (${H}['files_seen'], ${H}.get('artifacts_total'), ${H}['caps']['max_files'], ${H}['skipped_by_reason'], ${H}['skipped_total'])"
	# The result lists the first 100 (docs/result.md); the file it names has every one.
	check "hostile 100000 files: the result lists 100 artifacts, the file all of them" \
		"len(${H}['artifacts']) == 100 and sum(1 for _ in open(${H}['artifacts_file'])) == ${H}['caps']['max_files']" \
		"[len(${H}['artifacts']), ${H}.get('artifacts_file')]"
	check "hostile 100000 files: the skip list is capped and says how many it lists" \
		"len(${H}['skipped']) == ${H}['skipped_listed'] <= ${H}['caps']['max_skip_records'] and all(s['reason'] == 'over_count_cap' for s in ${H}['skipped'])" \
		"'listed %d (says %s), cap %s' % (len(${H}['skipped']), ${H}['skipped_listed'], ${H}['caps']['max_skip_records'])"
	after=$(nobj)
	max=$(rj "${H}['caps']['max_files']")
	MRUN=$(rj 'r["run_id"]')
	run_rbx ledger query --run "$MRUN" --json
	lj=$(rj '"%d %s" % (sum(e["type"] == "artifact" for e in r), [e["data"].get("skipped_total") for e in r if e["type"] == "harvest_skipped"])')
	if [ "$lj" = "$max [90000]" ]; then ok "hostile 100000 files: the ledger has $max artifact events and one harvest_skipped with skipped_total 90000"
	else not_ok "hostile 100000 files: the ledger records the artifacts and what was skipped" "artifact events, harvest_skipped totals: '$lj' (want '$max [90000]'; exit $RC)"; fi
	if [ $((after - before)) -le "$max" ] && [ $((after - before)) -gt 0 ]; then ok "hostile 100000 files: the store grew by $((after - before)) objects, at most max_files ($max)"
	else not_ok "hostile 100000 files: the store grew by at most max_files objects" "$before -> $after objects, max_files $max"; fi
fi

# 3e. A 2 GB sparse file (the policy raises RLIMIT_FSIZE so the step can make it). A manifest
# names its policy by name: this one is in a config dir of the test's own.
mkdir -p "$T/cfg/policies"
cp "$FIX/policy-bigfile.json" "$T/cfg/policies/runs-bigfile.json"
chmod -R a+rX "$T/cfg"
bytes() { du -sb "$STATE/artifacts" 2>/dev/null | cut -f 1; }
before=$(bytes)
RBX_ENV=("RUNBOX_CONFIG_DIR=$T/cfg")
hostile "hostile sparse 2G" "$FIX/hostile-sparse.json" 120
sparse_ok=$?
RBX_ENV=()
if [ "$sparse_ok" = 0 ]; then
	H='r["steps"][0]["harvest"]'
	check "hostile sparse 2G control: the step made a 2 GiB file" 'r["steps"][0]["stdout"].strip() == "2147483648"' 'r["steps"][0]["stdout"]'
	check "hostile sparse 2G: skipped over_file_cap with its size, never read" \
		"[(s['path'], s['reason'], s.get('size')) for s in ${H}['skipped']] == [('big.sparse', 'over_file_cap', 2147483648)] and ${H}['bytes_read'] < (1 << 20) and [a['path'] for a in ${H}['artifacts']] == ['regular.txt']" \
		"'skipped %s, bytes_read %s, artifacts %s' % (${H}['skipped'], ${H}['bytes_read'], [a['path'] for a in ${H}['artifacts']])"
	after=$(bytes)
	if [ $((after - before)) -lt 1048576 ]; then ok "hostile sparse 2G: the store grew by $((after - before)) bytes (< 1 MiB)"
	else not_ok "hostile sparse 2G: the store grew by less than 1 MiB" "$before -> $after bytes"; fi
fi

# 3f. A 1,000-deep tree: the depth cap holds and is recorded.
if hostile "hostile deep tree" "$FIX/hostile-deep.json" 120; then
	H='r["steps"][0]["harvest"]'
	check "hostile deep tree control: the step made 1000 levels" 'r["steps"][0]["stdout"].strip() == "1000"' 'r["steps"][0]["stdout"]'
	check "hostile deep tree: over_depth recorded, the deep leaf not stored, walk bounded" \
		"${H}['skipped_by_reason'].get('over_depth', 0) >= 1 and any(s['reason'] == 'over_depth' for s in ${H}['skipped']) and not any(a['path'].endswith('leaf.txt') for a in ${H}['artifacts']) and ${H}['dirs_seen'] <= ${H}['caps']['max_depth'] + 1" \
		"'by reason %s, dirs_seen %s, artifacts %s' % (${H}['skipped_by_reason'], ${H}['dirs_seen'], [a['path'][-20:] for a in ${H}['artifacts']])"
	check "hostile deep tree control: a file 10 levels down, within the cap, is stored" \
		"[a['path'] for a in ${H}['artifacts']] == ['deep' + '/d' * 9 + '/mid.txt']" "[a['path'] for a in ${H}['artifacts']]"
fi

run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "hostile runs: the ledger verifies ($(first_line "$OUT"))"
else not_ok "hostile runs: the ledger verifies" "exit $RC: $(first_line "$OUT$ERR")"; fi

# ---------------------------------------------------------------------------------------
# 6. 50 concurrent runs against one state directory.
new_state state-d
N=50
run_rbx ledger export --jsonl
before=$(grep -c '' "$T/out")
mkdir -p "$T/conc"
rbx_cmd run --image minimal --json -- /bin/true
pids=()
for i in $(seq $N); do
	timeout -k 5 240 "${RBX_CMD[@]}" </dev/null >"$T/conc/$i.out" 2>"$T/conc/$i.err" &
	pids+=($!)
done
fails=()
for i in $(seq $N); do
	wait "${pids[$((i - 1))]}" || fails+=("$i:$?:$(first_line "$(cat "$T/conc/$i.err")")")
done
if [ ${#fails[@]} = 0 ]; then ok "$N concurrent runs all exit 0"
else not_ok "$N concurrent runs all exit 0" "${#fails[@]} failed: ${fails[*]:0:3}"; fi
run_rbx ledger export --jsonl
c=$("$PY" - "$T/out" "$T/conc" $N <<'EOF'
import json, os, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
ids = set()
for i in range(1, int(sys.argv[3]) + 1):
    try:
        ids.add(json.load(open(os.path.join(sys.argv[2], "%d.out" % i)))["run_id"])
    except Exception:
        pass
starts = {e["run_id"] for e in ev if e["type"] == "run_start"}
ends = {e["run_id"] for e in ev if e["type"] == "run_end"}
n_s = sum(e["type"] == "run_start" for e in ev)
n_e = sum(e["type"] == "run_end" for e in ev)
seqs = [e["seq"] for e in ev]
print("%d %d %d %d %d %s" % (len(ids), n_s, n_e, len(ids & starts), len(ids & ends), seqs == list(range(1, len(ev) + 1))))
EOF
)
if [ "$before" = 0 ] && [ "$c" = "$N $N $N $N $N True" ]; then
	ok "$N concurrent runs: $N run_start and $N run_end events, one per run id, seqs without gaps"
else not_ok "$N concurrent runs: all recorded" "events before: $before; ids, run_start, run_end, ids started, ids ended, gapless: $c"; fi
run_rbx ledger verify
if [ "$RC" = 0 ] && [[ "$OUT" == "ledger intact: "* ]]; then ok "$N concurrent runs: the chain verifies ($(first_line "$OUT" | cut -c 1-40))"
else not_ok "$N concurrent runs: the chain verifies" "exit $RC: $(first_line "$OUT$ERR")"; fi

# ---------------------------------------------------------------------------------------
# 7. SIGTERM to runbox while a step sleeps: cancelled, exit 143, recorded; control: the same
# run left alone succeeds.
new_state state-e
cancel_manifest() { # cancel_manifest RUN SECS MARK > FILE
	sed -e "s/@RUN@/$1/g" -e "s/@SECS@/$2/g" -e "s/@MARK@/$3/g" "$FIX/cancel.json"
}
# ended RUN: prints the result of the run's run_end event, or nothing.
ended() {
	run_rbx ledger show "$1" --json
	rj '[e["data"]["result"] for e in r if e["type"] == "run_end"][0]'
}
CRUN=c$$r$RANDOM
CMARK=$(new_marker)
cancel_manifest "$CRUN-ctl" 1 "$(new_marker)" >"$T/cancel-ctl.json"
run_manifest "$T/cancel-ctl.json" 60
cres=$(ended "$CRUN-ctl")
if [ "$RC" = 0 ] && [ "$cres" = success ]; then ok "cancel control: the same run left alone succeeds and is recorded success"
else not_ok "cancel control: the same run left alone succeeds" "exit $RC, run_end result '$cres': $(first_line "$ERR")"; fi

cancel_manifest "$CRUN" 300 "$CMARK" >"$T/cancel.json"
rbx_cmd run "$T/cancel.json" --json
timeout -k 5 120 "${RBX_CMD[@]}" </dev/null >"$T/cancel.out" 2>"$T/cancel.err" &
cpid=$!
if ! wait_for has_marker "$CMARK"; then
	not_ok "cancel: the step starts" "no process with $CMARK after 10 s: $(first_line "$(cat "$T/cancel.err")")"
	kill -TERM "$cpid" 2>/dev/null
	wait "$cpid"
else
	# The runbox process itself (timeout's child; env and setpriv exec it).
	rpid=$(pgrep -P "$cpid" | head -n 1)
	kill -TERM "$rpid"
	gone() { ! kill -0 "$rpid" 2>/dev/null; }
	if wait_for gone; then
		wait "$cpid"
		RC=$?
		if [ "$RC" = 143 ]; then ok "cancel: SIGTERM to runbox mid-step makes it exit 143"
		else not_ok "cancel: SIGTERM to runbox mid-step makes it exit 143" "exit $RC: $(first_line "$(cat "$T/cancel.err")")"; fi
	else
		not_ok "cancel: SIGTERM to runbox mid-step makes it exit" "still running 10 s after SIGTERM"
		kill -KILL "$rpid" 2>/dev/null
		wait "$cpid"
	fi
	if wait_for no_marker "$CMARK"; then ok "cancel: no sandbox process is left"
	else not_ok "cancel: no sandbox process is left" "pids $(pids_with "$CMARK" | tr '\n' ' ')"; fi
	cp "$T/cancel.out" "$T/out"
	if rj 'r["result"]' >/dev/null; then
		check "cancel: the result says cancelled, the second step never ran" \
			'r["result"] == "cancelled" and len(r["steps"]) == 1 and r["steps"][0]["status"] == "cancelled"' \
			'"result %s, steps %s" % (r["result"], [s["status"] for s in r["steps"]])'
		check "cancel: what the step wrote before is harvested" \
			'"started.txt" in [a["path"] for a in r["steps"][0]["harvest"]["artifacts"]]' 'r["steps"][0]["harvest"]'
	else
		not_ok "cancel: runbox prints the result" "stdout: $(head -c 200 "$T/cancel.out"); stderr: $(first_line "$(cat "$T/cancel.err")")"
	fi
	res=$(ended "$CRUN")
	if [ "$res" = cancelled ]; then ok "cancel: the ledger's run_end says cancelled"
	else not_ok "cancel: the ledger's run_end says cancelled" "run_end result '$res' ($(rj '[(e["type"], e["data"].get("status", e["data"].get("result"))) for e in r]' | cut -c 1-200))"; fi
fi
run_rbx ledger verify
if [ "$RC" = 0 ]; then ok "cancel: the ledger verifies"
else not_ok "cancel: the ledger verifies" "exit $RC: $(first_line "$OUT$ERR")"; fi

# --- the steps' logs in the run directory share one budget for the run: 64 MiB ---
# Two steps write 40 MiB each (stdout, then stderr); while a third sleeps, the host sums the
# step logs in the run directory. Before session 4 each stream of each step had 64 MiB of its
# own, so this run kept 80 MiB there (a 1024-step run: 128 GiB, usually on a tmpfs). Control:
# the logs hold at least the first step's 40 MiB, so they are written at all. A step's log is
# made at its first byte, so step 3 (silent) is seen to have started by its step_start.
LRUN=l$$r$RANDOM
cat >"$T/logs.json" <<EOF2
{"tenant": "t", "agent": "logs", "image": "minimal", "run_id": "$LRUN",
 "steps": [{"script": "head -c 41943040 /dev/zero"},
           {"script": "head -c 41943040 /dev/zero >&2"},
           {"script": "sleep 5"}]}
EOF2
rbx_cmd run "$T/logs.json" --json
timeout -k 5 120 "${RBX_CMD[@]}" </dev/null >"$T/logs.out" 2>"$T/logs.err" &
lp=$!
logged=""
for i in $(seq 1 150); do
	run_rbx ledger query --run "$LRUN" --type step_start --json
	if [ "$(rj 'len([e for e in r if e["data"]["step"] == 3])')" = 1 ]; then
		logged=$(find "$STATE/run" -mindepth 2 -maxdepth 2 -name 'step-*.std*' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
		break
	fi
	sleep 0.1
done
wait $lp
lrc=$?
if [ -z "$logged" ]; then not_ok "step logs: one 64 MiB budget for the run" "step 3's log never appeared (exit $lrc: $(first_line "$(cat "$T/logs.err")"))"
elif [ "$logged" -lt 41943040 ]; then skip "step logs: one 64 MiB budget for the run" "control: only $logged bytes logged"
elif [ "$logged" -gt 67108864 ]; then not_ok "step logs: one 64 MiB budget for the run" "$logged bytes in the run directory"
elif [ "$lrc" != 0 ]; then not_ok "step logs: one 64 MiB budget for the run" "exit $lrc"
else ok "step logs: one 64 MiB budget for the run ($logged bytes kept of 80 MiB written)"; fi
