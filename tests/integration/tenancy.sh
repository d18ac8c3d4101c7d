#!/usr/bin/env bash
# What a manifest may bind from the host, and whose it is: a skill folder passes the policy's
# inputs.allow as an input does; a skill step runs a sealed copy of its bundle, whose digest
# (every file) is in the ledger, so a host change during the step changes neither what runs nor
# what was recorded; an artifact input must be one its own tenant's runs stored (another
# tenant's digest and one nobody stored get one message); stored objects are not readable by
# other host users. Each check has a control.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init tenancy

readable() { chmod -R a+rX "$@"; }

# bundle DIR ENTRY-BODY [DATA]: a skill named `probe` whose entry is run.sh (so every bundle
# made here has the one entry path /workspace/skills/probe/run.sh), with an optional data.txt.
bundle() {
	mkdir -p "$1"
	printf -- '---\nname: probe\ndescription: A tenancy.sh fixture.\nentry: run.sh\ntimeout: 60s\n---\n' >"$1/SKILL.md"
	printf '#!/bin/sh\n%s\n' "$2" >"$1/run.sh"
	chmod 0755 "$1/run.sh"
	[ -z "${3:-}" ] || printf '%s\n' "$3" >"$1/data.txt"
	readable "$1"
}

# skill_manifest OUT RUN_ID BUNDLE [EXTRA-TOP-LEVEL-JSON]: one skill step of BUNDLE.
skill_manifest() {
	"$PY" - "$@" <<'EOF'
import json, sys
out, run_id, b = sys.argv[1], sys.argv[2], sys.argv[3]
m = {"tenant": "acme", "agent": "tenancy", "run_id": run_id, "image": "minimal",
     "skills": [b], "steps": [{"name": "probe", "skill": "probe"}]}
if len(sys.argv) > 4:
    m.update(json.loads(sys.argv[4]))
json.dump(m, open(out, "w"), indent=1)
EOF
	chmod a+r "$1"
}

# ledger_digest RUN_ID: the bundle_digest of the run's step_start in the ledger.
ledger_digest() {
	run_rbx ledger show "$1" --json
	"$PY" - "$T/out" <<'EOF' 2>/dev/null
import json, sys
ev = [e for e in json.load(open(sys.argv[1])) if e["type"] == "step_start"]
print(ev[0]["data"].get("bundle_digest", "none") if len(ev) == 1 else "no-single-step_start")
EOF
}

# walk_digest DIR: the bundle digest recomputed here from docs/manifest.md's definition.
walk_digest() {
	"$PY" - "$1" <<'EOF'
import hashlib, os, stat, sys
top = sys.argv[1]
h = hashlib.sha256()
def put(s):
    h.update(s.encode() + b"\0")
def rec(t, mode, rel):
    put(t); put("%04o" % mode); put(rel)
def walk(d, rel):
    for name in sorted(os.listdir(d), key=lambda n: n.encode()):
        p, r = os.path.join(d, name), (name if rel == "." else rel + "/" + name)
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            rec("l", 0o777, r); put(os.readlink(p))
        elif stat.S_ISDIR(st.st_mode):
            rec("d", st.st_mode & 0o555, r); walk(p, r)
        else:
            data = open(p, "rb").read()
            rec("f", st.st_mode & 0o555, r); put(str(len(data))); put(hashlib.sha256(data).hexdigest())
rec("d", os.lstat(top).st_mode & 0o555, ".")
walk(top, ".")
print("sha256:" + h.hexdigest())
EOF
}

# ---------------------------------------------------------------------------------------
# 1. A skill folder outside the policy's inputs.allow is refused, naming the folder and the
# policy (finding 11). Control: the same bundle inside inputs.allow runs.
mkdir -p "$T/allowed" "$T/outside"
readable "$T/allowed" "$T/outside"
# A manifest names its policy by name: this one is in a config dir of the test's own.
mkdir -p "$T/cfg/policies"
policy_variant default "$T/cfg/policies/narrow-inputs.json" narrow-inputs "p['inputs']['allow'] = ['$T/allowed']"
chmod -R a+rX "$T/cfg"
RBX_ENV=("RUNBOX_CONFIG_DIR=$T/cfg")
ok_body='echo "{\"ran\": true}"'
bundle "$T/outside/sk" "$ok_body"
bundle "$T/allowed/sk" "$ok_body"
skill_manifest "$T/out-allow.json" "ia$$r$RANDOM" "$T/outside/sk" "{\"policy\": \"narrow-inputs\"}"
run_manifest "$T/out-allow.json"
if [ "$RC" = 125 ] && grep -qF "skill \`$T/outside/sk\`: policy \`narrow-inputs\` allows no input there" <<<"$ERR"; then
	ok "a skill folder outside inputs.allow is refused (125), naming it and the policy"
else not_ok "a skill folder outside inputs.allow is refused" "exit $RC: $(first_line "$ERR")"; fi
skill_manifest "$T/in-allow.json" "ib$$r$RANDOM" "$T/allowed/sk" "{\"policy\": \"narrow-inputs\"}"
run_manifest "$T/in-allow.json"
if [ "$RC" = 0 ] && [ "$(rj 'r["steps"][0]["result"] == {"ran": True}')" = true ]; then
	ok "control: the same bundle inside inputs.allow runs"
else not_ok "control: the same bundle inside inputs.allow runs" "exit $RC: $(first_line "$ERR") $(head -c 300 "$T/out")"; fi
RBX_ENV=()
# The never-an-input rules hold for skill folders as for inputs, whatever the policy allows.
skill_manifest "$T/never.json" "ic$$r$RANDOM" "/proc/self"
run_manifest "$T/never.json"
if [ "$RC" = 125 ] && grep -qF "is never an input" <<<"$ERR"; then ok "a skill folder under /proc is never an input"
else not_ok "a skill folder under /proc is never an input" "exit $RC: $(first_line "$ERR")"; fi

# ---------------------------------------------------------------------------------------
# 2. The ledger's record of a skill step names its bundle by a digest of every file
# (finding 13): two bundles with one entry path differ, the same bundle twice agrees, and a
# bundle that differs only in a file that is not the entry differs too.
bundle "$T/bx" 'echo "{\"v\": \"x\"}"' "one"
bundle "$T/by" 'echo "{\"v\": \"y\"}"' "one"
bundle "$T/bz" 'echo "{\"v\": \"x\"}"' "two"
declare -A D
for b in bx by bz bx2; do
	id=d$b$$r$RANDOM
	skill_manifest "$T/$b.json" "$id" "$T/${b%2}"
	run_manifest "$T/$b.json"
	D[res_$b]=$(rj 'r["steps"][0].get("bundle_digest")')
	D[$b]=$(ledger_digest "$id")
done
if [[ ${D[bx]} == sha256:* ]] && [ "${D[bx]}" = "${D[bx2]}" ] && [ "${D[bx]}" = "${D[res_bx]}" ]; then
	ok "the same bundle twice: one digest, in the ledger and in the result"
else not_ok "the same bundle twice: one digest" "ledger ${D[bx]} / ${D[bx2]}, result ${D[res_bx]}"; fi
if [[ ${D[by]} == sha256:* ]] && [ "${D[bx]}" != "${D[by]}" ]; then
	ok "two bundles with the same entry path: different digests in the ledger"
else not_ok "two bundles with the same entry path: different digests" "${D[bx]} vs ${D[by]}"; fi
if [[ ${D[bz]} == sha256:* ]] && [ "${D[bx]}" != "${D[bz]}" ]; then
	ok "a bundle differing only in a data file (not the entry) has another digest"
else not_ok "a bundle differing only in a data file has another digest" "${D[bx]} vs ${D[bz]}"; fi
want=$(walk_digest "$T/bx")
if [ "${D[bx]}" = "$want" ]; then ok "the digest is the documented walk over names, modes and contents"
else not_ok "the digest is the documented walk" "ledger ${D[bx]}, recomputed $want"; fi

# ---------------------------------------------------------------------------------------
# 3. The host bundle rewritten while the step runs changes neither what runs nor what was
# digested. The step waits until the test has rewritten both its own entry on the host (in
# place, same inode) and a file of a live input folder, then reads both. Control: the live
# input shows the change, so the rewrite happened while the step ran and a live bind of the
# bundle would have shown it too.
mkdir -p "$T/live" && echo before >"$T/live/flag" && readable "$T/live"
wait_body='i=0
while ! grep -q CHANGED /workspace/in/live/flag && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
# ORIGINAL-ENTRY
own=$(grep -c -e "EVIL-""ENTRY" /workspace/skills/probe/run.sh)
data=$(cat /workspace/skills/probe/data.txt)
echo "{\"live\": \"$(cat /workspace/in/live/flag)\", \"evil_lines\": $own, \"data\": \"$data\"}"'
bundle "$T/bw" "$wait_body" "data-before"
orig=$(walk_digest "$T/bw")
ID=w$$r$RANDOM
skill_manifest "$T/bw.json" "$ID" "$T/bw" '{"inputs": [{"from": "'"$T/live"'", "to": "/workspace/in/live"}]}'
rbx_cmd run "$T/bw.json" --json
"${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err" &
pid=$!
sealed=$STATE/run/$ID/sealed
if wait_for test -e "$sealed"; then
	sleep 0.5
	printf '#!/bin/sh\necho "{\\"v\\": \\"EVIL-ENTRY\\"}"\n' >"$T/bw/run.sh" # same inode
	echo data-after >"$T/bw/data.txt"
	echo CHANGED >"$T/live/flag"
else note "the run's sealed directory never appeared at $sealed"; fi
wait $pid
RC=$? ERR=$(cat "$T/err")
if grep -q EVIL-ENTRY "$T/bw/run.sh"; then ctl=1; else ctl=0; fi
check "bundle rewritten during the step, control: the live input showed the change" \
	'r["steps"][0]["result"]["live"] == "CHANGED"' '"%s: %r %r" % (r["steps"][0]["status"], r["steps"][0].get("result"), r["steps"][0]["stderr"][-300:])'
if [ $ctl = 1 ]; then
	check "bundle rewritten during the step: the step read its sealed entry and data, not the rewrite" \
		'r["steps"][0]["result"]["evil_lines"] == 0 and r["steps"][0]["result"]["data"] == "data-before"' \
		'repr(r["steps"][0].get("result"))'
else not_ok "bundle rewritten during the step: the host entry was rewritten" "$(head -c 200 "$T/bw/run.sh")"; fi
got=$(ledger_digest "$ID")
now=$(walk_digest "$T/bw")
if [ "$got" = "$orig" ] && [ "$now" != "$orig" ]; then
	ok "bundle rewritten during the step: the ledger has the digest of what ran (the host's is another now)"
else not_ok "bundle rewritten during the step: the ledger has the digest of what ran" "ledger $got, before $orig, host now $now"; fi
if [ ! -e "$STATE/run/$ID" ]; then ok "the sealed copy goes with the run directory"
else not_ok "the sealed copy goes with the run directory" "$(ls -la "$STATE/run/$ID" | head -n 3)"; fi

# ---------------------------------------------------------------------------------------
# 4. Tenants (finding 14): tenant A stores an artifact; tenant B naming its digest fails with
# the very message a digest nobody stored gets; control: tenant A's next run reads it.
MARK=$(new_marker)
art_manifest() { # OUT TENANT DIGEST
	printf '{"tenant": "%s", "agent": "tenancy", "image": "minimal",
 "inputs": [{"artifact": "%s", "to": "/workspace/in/a.txt"}],
 "steps": [{"script": "cat /workspace/in/a.txt"}]}\n' "$2" "$3" >"$1"
	chmod a+r "$1"
}
printf '{"tenant": "tenant-a", "agent": "tenancy", "image": "minimal",
 "steps": [{"script": "mkdir -p /workspace/out && echo %s > /workspace/out/a.txt"}]}\n' "$MARK" >"$T/store-a.json"
chmod a+r "$T/store-a.json"
run_manifest "$T/store-a.json"
digest=$(rj 'r["steps"][0]["harvest"]["artifacts"][0]["digest"]')
hex=${digest#sha256:}
if [ ${#hex} != 64 ]; then not_ok "tenant A stores an artifact" "exit $RC: $(first_line "$ERR")"
else
	nobody=$(printf '%064d' 0 | tr 0 e)
	art_manifest "$T/b-theirs.json" tenant-b "$digest"
	run_manifest "$T/b-theirs.json"
	rc_theirs=$RC err_theirs=${ERR//$hex/DIGEST}
	art_manifest "$T/b-none.json" tenant-b "sha256:$nobody"
	run_manifest "$T/b-none.json"
	rc_none=$RC err_none=${ERR//$nobody/DIGEST}
	if [ "$rc_theirs" = 125 ] && grep -q "no artifact sha256:DIGEST stored by a run of tenant \`tenant-b\`" <<<"$err_theirs"; then
		ok "tenant B naming tenant A's artifact is refused (125)"
	else not_ok "tenant B naming tenant A's artifact is refused" "exit $rc_theirs: $(first_line "$err_theirs")"; fi
	if [ "$rc_none" = 125 ] && [ "$err_theirs" = "$err_none" ]; then
		ok "tenant A's digest and a digest nobody stored get the same message"
	else not_ok "another tenant's digest and a missing one get the same message" "'$(first_line "$err_theirs")' vs '$(first_line "$err_none")' (exit $rc_none)"; fi
	if grep -qF "$MARK" "$T/out" 2>/dev/null; then not_ok "tenant B read nothing of tenant A's artifact" "its content is in the result"
	else ok "tenant B read nothing of tenant A's artifact"; fi
	art_manifest "$T/a-own.json" tenant-a "$digest"
	run_manifest "$T/a-own.json"
	if [ "$RC" = 0 ] && rj 'r["steps"][0]["stdout"]' | grep -qF "$MARK"; then
		ok "control: tenant A's next run reads its own artifact"
	else not_ok "control: tenant A's next run reads its own artifact" "exit $RC: $(first_line "$ERR")"; fi

	# Objects are not world-readable: checked on the object this run just stored; the check
	# itself fails on a 0644 file (control), and another host user cannot read the object
	# while it can read a 0644 file beside the test's.
	obj=$STATE/artifacts/sha256/${hex:0:2}/$hex
	private() { [ $((0$(stat -c %a "$1") & 07)) = 0 ]; }
	printf x >"$T/scratch/open" && chmod 0644 "$T/scratch/open" && chmod 0755 "$T/scratch"
	if private "$T/scratch/open"; then not_ok "control: the mode check fails on a 0644 file" "it passed"
	elif private "$obj"; then ok "a freshly stored object is not world-readable (mode $(stat -c %a "$obj"))"
	else not_ok "a freshly stored object is not world-readable" "mode $(stat -c %a "$obj")"; fi
	other=$NOBODY
	[ "$MODE" = root ] || other=65533
	if ! setpriv --reuid=$other --regid=$other --clear-groups cat "$T/scratch/open" >/dev/null 2>&1; then
		not_ok "another host user cannot read a stored object" "control: uid $other cannot read a 0644 file"
	elif setpriv --reuid=$other --regid=$other --clear-groups cat "$obj" >/dev/null 2>&1; then
		not_ok "another host user cannot read a stored object" "uid $other read $obj"
	else ok "another host user cannot read a stored object (control: it reads a 0644 file)"; fi
	# An object an older runbox left 0644 loses its world bits when stored again.
	chmod 0644 "$obj"
	was=$(stat -c %a "$obj")
	run_manifest "$T/store-a.json"
	if [ "$was" = 644 ] && [ "$RC" = 0 ] && private "$obj"; then
		ok "a 0644 object met again is made private (now $(stat -c %a "$obj"))"
	else not_ok "a 0644 object met again is made private" "was $was, now $(stat -c %a "$obj"), exit $RC"; fi
fi
