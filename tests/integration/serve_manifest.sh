#!/usr/bin/env bash
# runbox serve's session manifests (docs/serve.md "Manifests"), each property against a control:
# files and directories are made with their modes and contents (utf8 and base64); an input the
# policy's inputs.allow does not cover is 403 and makes no session, an allowed one is mounted
# read-only; ephemeral env values and files never reach the ledger by value (names do) nor a
# snapshot (a normal file does); a live session takes more entries (POST .../manifest) but not
# inputs; a skill bundle follows the policy as an input does; unknown keys are 400 naming their
# path; a caller's run_id label is recorded, queryable and must be an id; the operator's
# config names warm pool pairs, and a claimed member takes a manifest after its claim.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_manifest

serve_client
ex() { run_rbx exec --socket "$SOCK" "$S" -- "$@"; }
nsessions() { api GET /v1/sessions; jv 'len(r["sessions"])'; }

# The operator's policy `mtest`: inputs only from $T/allowed.
mkdir -p "$T/cfg/policies" "$T/allowed/data" "$T/forbidden"
echo "in-$RANDOM" >"$T/allowed/data/f"
echo no >"$T/forbidden/f"
chmod -R a+rX "$T/allowed" "$T/forbidden" "$T/cfg"
policy_variant default "$T/cfg/policies/mtest.json" mtest "p['inputs'] = {'allow': ['$T/allowed']}"
RBX_ENV=("RUNBOX_CONFIG_DIR=$T/cfg")

serve_start serve.log || exit 0

MARK=$(new_marker)
B64=$(printf 'bin\001-%s' "$MARK" | base64 -w0)
BODY=$("$PY" - "$MARK" "$B64" "$T/allowed/data" <<'EOF'
import json, sys
mark, b64, inp = sys.argv[1:4]
print(json.dumps({"image": "minimal", "policy": "mtest", "labels": {"run_id": "ext-" + mark},
  "manifest": {
    "files": [{"path": "/workspace/m/a.txt", "content": "hello-" + mark, "mode": "0640"},
              {"path": "/workspace/b.bin", "content": b64, "encoding": "base64", "mode": "0755"},
              {"path": "/workspace/secret.txt", "content": "filesecret-" + mark, "ephemeral": True}],
    "directories": [{"path": "/workspace/d1/d2", "mode": "0700"}],
    "env": {"PLAIN": "plain-" + mark, "EPH": {"value": "envsecret-" + mark, "ephemeral": True}},
    "inputs": [{"from": inp}]}}))
EOF
)
api POST /v1/sessions "$BODY"
S=$(jv 'r["id"]')
RUN_ID=$(jv 'r["run_id"]')
if [ "$ST" != 201 ] || [[ ! "$S" =~ ^[0-9a-f]{32}$ ]]; then not_ok "a session with a manifest is made" "$ST $R"; kill "$DPID"; exit 0; fi

# --- files and directories, their modes ---------------------------------------------------------
ex sh -c 'stat -c "%n %a" /workspace/m/a.txt /workspace/b.bin /workspace/d1/d2; cat /workspace/m/a.txt; echo; od -An -c /workspace/b.bin | tr -s " "'
want_bin=$(printf 'bin\001-%s' "$MARK" | od -An -c | tr -s ' ')
if [ "$RC" = 0 ] && grep -qx '/workspace/m/a.txt 640' <<<"$OUT" && grep -qx '/workspace/b.bin 755' <<<"$OUT" &&
	grep -qx '/workspace/d1/d2 700' <<<"$OUT" && grep -qx "hello-$MARK" <<<"$OUT" && grep -qF -- "$want_bin" <<<"$OUT"; then
	ok "manifest files (utf8, base64) and directories are made with their modes and contents"
else not_ok "manifest files and directories are made" "exit $RC: $OUT $(first_line "$ERR")"; fi

# --- inputs: the policy decides --------------------------------------------------------------------
ex sh -c "cat /workspace/in/data/f; echo x >/workspace/in/data/f && echo WROTE; echo y >/workspace/ok && echo WROTE-WS"
if grep -q '^in-' <<<"$OUT" && ! grep -qx WROTE <<<"$OUT" && grep -qx WROTE-WS <<<"$OUT" && grep -q '^in-' "$T/allowed/data/f"; then
	ok "an input the policy allows is mounted read-only (a write inside fails; control: /workspace is writable)"
else not_ok "an allowed input is mounted read-only" "$OUT $(first_line "$ERR")"; fi
before=$(nsessions)
api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"mtest\", \"manifest\": {\"inputs\": [{\"from\": \"$T/forbidden\"}], \"files\": [{\"path\": \"/workspace/made\", \"content\": \"x\"}]}}"
fst=$ST fr=$R
after=$(nsessions)
if [ "$fst" = 403 ] && grep -q "allows no input there" <<<"$fr" && [ "$before" = "$after" ]; then
	ok "an input outside the policy's inputs.allow is 403 and makes no session ($before sessions before and after)"
else not_ok "a forbidden input is refused" "$fst $fr; sessions $before -> $after"; fi

# --- skills: the policy decides, as for inputs ----------------------------------------------------
for d in "$T/allowed/sk" "$T/forbidden/sk"; do
	mkdir -p "$d"
	printf -- '---\nname: probe\ndescription: a fixture.\nentry: run.sh\ntimeout: 60s\n---\n' >"$d/SKILL.md"
	printf '#!/bin/sh\necho skill-%s\n' "$MARK" >"$d/run.sh"
	chmod -R a+rX "$d"; chmod 0755 "$d/run.sh"
done
before=$(nsessions)
api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"mtest\", \"manifest\": {\"skills\": [\"$T/forbidden/sk\"]}}"
skf="$ST $R"
api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"mtest\", \"manifest\": {\"skills\": [\"$T/allowed/sk\"]}}"
SK=$(jv 'r["id"]')
S=$SK ex sh -c '/workspace/skills/probe/run.sh; echo x > /workspace/skills/probe/run.sh && echo WROTE'
if [[ "$skf" == 403*"allows no input there"* ]] && [ "$(nsessions)" = "$((before + 1))" ] && [ "$(printf '%s' "$OUT" | head -n 1)" = "skill-$MARK" ] &&
	! grep -qx WROTE <<<"$OUT"; then
	ok "a skill bundle outside inputs.allow is 403 with no session; an allowed one is mounted read-only at /workspace/skills/NAME"
else not_ok "manifest skills follow the policy" "forbidden: $skf; allowed: $OUT $(first_line "$ERR")"; fi
api DELETE "/v1/sessions/$SK"
after=$(nsessions)

# --- strict validation -----------------------------------------------------------------------
api POST /v1/sessions '{"image": "minimal", "manifest": {"filez": []}}'; a="$ST $R"
api POST /v1/sessions '{"image": "minimal", "manifest": {"files": [{"path": "/workspace/x", "contents": "y"}]}}'; b="$ST $R"
api POST /v1/sessions '{"image": "minimal", "manifest": {"files": [{"path": "/etc/x", "content": "y"}]}}'; c="$ST $R"
api POST /v1/sessions '{"image": "minimal", "labels": {"run_id": "../x"}}'; d="$ST $R"
if [[ "$a" == 400*'$.manifest'*filez* ]] && [[ "$b" == 400*'$.manifest.files[0]'*contents* ]] &&
	[[ "$c" == 400*'$.manifest.files[0].path'* ]] && [[ "$d" == 400*'$.labels.run_id'* ]] && [ "$(nsessions)" = "$after" ]; then
	ok "unknown manifest keys, a path outside /workspace and a run_id label that is no id are 400 naming the path (control: the valid create was 201)"
else not_ok "manifests are checked strictly" "$a | $b | $c | $d"; fi

# --- ephemeral env and files -----------------------------------------------------------------
# The command names neither value (its text is recorded): it prints their digests.
ex sh -c 'printf %s "$EPH" | sha256sum; printf %s "$PLAIN" | sha256sum'
envout=$OUT
esha=$(printf 'envsecret-%s' "$MARK" | sha256sum | cut -d' ' -f1)
psha=$(printf 'plain-%s' "$MARK" | sha256sum | cut -d' ' -f1)
run_rbx ledger show "$RUN_ID" --json
led=$OUT
rawhits=$(cat "$STATE"/ledger.db* 2>/dev/null | grep -a -c -e "envsecret-$MARK" -e "filesecret-$MARK")
asha=$(printf 'hello-%s' "$MARK" | sha256sum | cut -d' ' -f1)
if grep -q "$esha" <<<"$envout" && grep -q "$psha" <<<"$envout" && [ "$rawhits" = 0 ] &&
	! grep -q -e "envsecret-$MARK" -e "filesecret-$MARK" <<<"$led" && grep -q '"EPH"' <<<"$led" &&
	grep -q '"PLAIN"' <<<"$led" && grep -q "$asha" <<<"$led" && grep -q '/workspace/secret.txt' <<<"$led"; then
	ok "an ephemeral env value and file reach processes but never the ledger by value (names do; control: a normal file's sha256 is there)"
else not_ok "ephemeral values stay out of the ledger" "env '$envout', raw hits $rawhits, ledger $(grep -o -e "envsecret-$MARK" -e "filesecret-$MARK" <<<"$led" | head -2)"; fi

api POST "/v1/sessions/$S/snapshots" '{}'
REF=$(jv 'r["ref"]')
"${CLIENT[@]}" curl -s --unix-socket "$SOCK" -o "$T/home/snap.tzst" "http://runbox/v1/snapshots/$REF"
members=$(zstd -dc <"$T/home/snap.tzst" 2>/dev/null | tar -t 2>/dev/null | tr '\n' ' ')
api POST /v1/sessions "{\"image\": \"minimal\", \"snapshot\": \"$REF\"}"
S2=$(jv 'r["id"]')
S=$S2 ex sh -c "cat /workspace/m/a.txt; echo; [ -e /workspace/secret.txt ] && echo SECRET-FILE; [ -n \"\$EPH\" ] && echo SECRET-ENV; true"
if [[ "$members" == *m/a.txt* ]] && [[ "$members" != *secret.txt* ]] && grep -qx "hello-$MARK" <<<"$OUT" &&
	! grep -q SECRET <<<"$OUT"; then
	ok "a snapshot leaves the ephemeral file out and a session from it has no ephemeral env (control: the normal file is kept)"
else not_ok "ephemeral entries stay out of snapshots" "members: $members; from snapshot: $OUT $(first_line "$ERR")"; fi

# --- a live session takes more entries, but no input ------------------------------------------
api POST "/v1/sessions/$S2/manifest" "{\"files\": [{\"path\": \"/workspace/late\", \"content\": \"late-$MARK\", \"mode\": \"0600\"}], \"env\": {\"LATE\": \"v-$MARK\"}}"
a=$ST
S=$S2 ex sh -c 'stat -c %a /workspace/late; cat /workspace/late; echo; echo "$LATE"'
late=$OUT
api POST "/v1/sessions/$S2/manifest" "{\"inputs\": [{\"from\": \"$T/allowed/data\"}]}"
if [ "$a" = 200 ] && [ "$(printf '600\nlate-%s\nv-%s' "$MARK" "$MARK")" = "$late" ] && [ "$ST" = 409 ] && grep -q "inputs" <<<"$R"; then
	ok "POST .../manifest lays files and env into a live session (control: inputs there are 409)"
else not_ok "POST .../manifest" "$a '$late'; inputs $ST $R"; fi

# --- the caller's run_id label ------------------------------------------------------------------
run_rbx ledger query --label "run_id=ext-$MARK" --json
q1=$(R=$OUT jv 'sorted(set(e["run_id"] for e in r))')
qtypes=$(R=$OUT jv 'sorted(set(e["type"] for e in r))')
run_rbx ledger query --label "run_id=ext-nope-$MARK" --json
q2=$OUT
run_rbx ledger query --label "run_id" --json
q3=$RC
if [ "$q1" = "[\"$RUN_ID\"]" ] && [[ "$RUN_ID" != "ext-$MARK" ]] && [[ "$qtypes" == *manifest*run_start* ]] && [ "$q2" = "[]" ] && [ "$q3" != 0 ]; then
	ok "ledger query --label run_id=X finds the events of the run the caller labelled, beside runbox's own run id (control: another value finds nothing)"
else not_ok "the run_id label is queryable" "q1 '$q1' types '$qtypes' other '$(first_line "$q2")' bare $q3"; fi

kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null

# --- the operator's config names the warm pool; a manifest applies to a claimed member ---------
echo '{"serve_pool": ["minimal"]}' >"$T/cfg/config.json"
chmod a+r "$T/cfg/config.json"
run_rbx serve --socket "$T/xdg/bad.sock"
if [ "$RC" = 125 ] && [[ "$ERR" == *"serve_pool[0]"* ]] && [ ! -e "$T/xdg/bad.sock" ]; then
	ok "a malformed serve_pool pair in the operator's config stops the daemon (125, naming serve_pool[0])"
else not_ok "a malformed serve_pool pair is refused" "exit $RC, $(first_line "$ERR")"; fi
echo '{"serve_pool": ["minimal:mtest=1"]}' >"$T/cfg/config.json"
rbx_cmd serve --socket "$SOCK"
"${RBX_CMD[@]}" </dev/null >"$T/serve2.log" 2>&1 &
DPID=$!
pool_ready() { api GET /v1/stats; [ "$(jv 'r["pool"][0]["ready"]')" = 1 ] && [ "$(jv 'r["pool"][0]["policy"]')" = mtest ]; }
if wait_for test -S "$SOCK" && (wait_for pool_ready || wait_for pool_ready); then
	ok "the operator's config.json serve_pool pair (minimal:mtest=1) fills a warm pool without --pool"
else not_ok "the operator's config names the warm pool" "$R $(tr "\n" " " <"$T/serve2.log")"; fi
api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"mtest\", \"manifest\": {\"files\": [{\"path\": \"/workspace/p\", \"content\": \"pooled-$MARK\", \"mode\": \"0600\"}], \"env\": {\"PV\": \"pv-$MARK\"}}}"
S=$(jv 'r["id"]') pooled=$(jv 'r["pooled"]')
ex sh -c 'stat -c %a /workspace/p; cat /workspace/p; echo; echo "$PV"'
pout=$OUT
api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"mtest\", \"manifest\": {\"inputs\": [{\"from\": \"$T/allowed/data\"}]}}"
if [ "$pooled" = true ] && [ "$pout" = "$(printf '600\npooled-%s\npv-%s' "$MARK" "$MARK")" ] && [ "$ST" = 201 ] && [ "$(jv 'r["pooled"]')" = false ]; then
	ok "a claimed pool member takes the manifest's files and env after its claim (control: one with inputs is made cold)"
else not_ok "a manifest on a pooled session" "pooled $pooled '$pout'; with inputs $ST $(jv 'r.get("pooled")')"; fi

# File calls act as the owner of /workspace, the policy's user: under strict (uid 1000) a
# manifest's file, a PUT and a mkdir are made and are that user's, which its processes then
# change; the default policy's are its root's (control).
for pol in default strict; do
	api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"$pol\", \"manifest\": {\"files\": [{\"path\": \"/workspace/m\", \"content\": \"m-$pol\"}]}}"
	made="$ST" made_r=$R
	S=$(jv 'r["id"]')
	api PUT "/v1/sessions/$S/files?path=/workspace/p" "p-$pol"
	made="$made $ST"
	api POST "/v1/sessions/$S/fs/mkdir" '{"path": "/workspace/dd"}'
	made="$made $ST"
	ex sh -c 'echo more >> /workspace/p && touch /workspace/dd/x && stat -c %u /workspace /workspace/m /workspace/p /workspace/dd | sort -u | tr "\n" " "; cat /workspace/m'
	want=0
	[ $pol = strict ] && want=1000
	if [ $pol = strict ] && [ "$MODE" = subids ]; then
		# Rootless with subordinate ids, uid 1000 is a subordinate host id the daemon cannot act
		# as: writing into its /workspace is refused, named (docs/serve.md "Files").
		[[ "$made" == "403 "* ]] && [[ "$made_r" == *"Permission denied"* ]] &&
			ok "rootless with subordinate ids, a strict session's manifest file is refused (403: the daemon cannot act as uid 1000)" ||
			not_ok "rootless with subordinate ids, a strict session's file calls are refused" "statuses '$made' $made_r"
	elif [ "$made" = "201 200 200" ] && [ "$RC" = 0 ] && [ "$OUT" = "$want m-$pol" ]; then
		ok "a $pol session's manifest file, PUT and mkdir are made as /workspace's owner (uid $want), and its processes change them"
	else not_ok "a $pol session's file calls act as /workspace's owner" "statuses '$made'; exit $RC '$OUT' $(first_line "$ERR")"; fi
	api DELETE "/v1/sessions/$S"
done
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
