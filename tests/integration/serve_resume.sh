#!/usr/bin/env bash
# runbox serve's resume (docs/serve.md "Resume"), each against a control: a live session id
# reconnects to itself; one closed by its idle timeout after a snapshot becomes a new session of
# its tenant, image and policy with the snapshot's files and no ephemeral env, and the new run
# records a `resume` event; one closed without a snapshot is a 409 naming that, an id that never
# was a 404; one lost in a daemon's SIGKILL resumes on the next daemon from its snapshot.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init serve_resume

serve_client
ex() { run_rbx exec --socket "$SOCK" "$S" -- "$@"; }
gone() { api GET "/v1/sessions/$1"; [ "$ST" = 404 ]; }

serve_start serve.log || exit 0
MARK=$(new_marker)

# A live session: resume is the same session.
api POST /v1/sessions '{"image": "minimal", "tenant": "tq", "agent": "ag"}'
L=$(jv 'r["id"]')
api POST "/v1/sessions/$L/resume" '{"idle_timeout": 5}'
withbody="$ST $R"
api POST "/v1/sessions/$L/resume" '{}'
if [ "$ST" = 200 ] && [ "$(jv 'r["id"]')" = "$L" ] && [ "$(jv 'r["resumed"]')" = live ] && [[ "$withbody" == 409*"is live"* ]]; then
	ok "a live session's id reconnects to itself (200, resumed: live; with a new session's settings it is 409)"
else not_ok "a live session reconnects" "$ST $R; with a body: $withbody"; fi

# Closed by its idle timeout after a snapshot.
api POST /v1/sessions "{\"image\": \"minimal\", \"tenant\": \"tq\", \"agent\": \"ag\", \"idle_timeout\": 2, \"labels\": {\"run_id\": \"ext-$MARK\"}, \"manifest\": {\"files\": [{\"path\": \"/workspace/keep\", \"content\": \"kept-$MARK\"}], \"env\": {\"EPH\": {\"value\": \"e-$MARK\", \"ephemeral\": true}}}}"
S=$(jv 'r["id"]') OLD_RUN=$(jv 'r["run_id"]')
api POST "/v1/sessions/$S/snapshots" '{}'
REF=$(jv 'r["ref"]')
# Closed without a snapshot.
api POST /v1/sessions '{"image": "minimal", "tenant": "tq", "idle_timeout": 2}'
N=$(jv 'r["id"]')
if ! wait_for gone "$S" || ! wait_for gone "$N"; then not_ok "idle sessions close" "$ST $R"; fi

api POST "/v1/sessions/$S/resume" '{}'
S2=$(jv 'r["id"]')
R1=$R; rs="$ST $(jv '[r["resumed"], r["tenant"], r["agent"], r["image"], r["resumed_from"]["snapshot"], r["resumed_from"]["closed"], r["labels"]["run_id"]]')"
NEW_RUN=$(jv 'r["run_id"]')
S=$S2 ex sh -c 'cat /workspace/keep; echo; [ -n "$EPH" ] && echo EPH-SET; true'
if [ "$rs" = "201 [\"snapshot\", \"tq\", \"ag\", \"minimal\", \"$REF\", \"idle timeout\", \"ext-$MARK\"]" ] && [ "$S2" != "$S" ] &&
	[ "$OUT" = "kept-$MARK" ]; then
	ok "a session closed by its idle timeout resumes as a new session of its tenant from its last snapshot (files kept, no ephemeral env)"
else not_ok "a closed session resumes from its snapshot" "$rs $R1; out '$OUT' $(first_line "$ERR")"; fi
run_rbx ledger show "$NEW_RUN" --json
if grep -q '"resume"' <<<"$OUT" && grep -q "$OLD_RUN" <<<"$OUT" && grep -q "$REF" <<<"$OUT"; then
	ok "the new run records its resume (from session, run and snapshot)"
else not_ok "the resume is recorded" "$(first_line "$OUT") $(first_line "$ERR")"; fi

api POST "/v1/sessions/$N/resume" '{}'
a="$ST $R"
api POST "/v1/sessions/0123456789abcdef0123456789abcdef/resume" '{}'
b="$ST $R"
api POST "/v1/sessions/$N/resume" '{"snapshot": "x"}'
c="$ST"
if [[ "$a" == 409*"without a snapshot"* ]] && [[ "$b" == 404*"no session"* ]] && [ "$c" = 400 ]; then
	ok "a closed session without a snapshot is 409 naming that; an unknown id 404; an unknown key 400 (control: the one with a snapshot resumed)"
else not_ok "resume refuses what it cannot" "$a | $b | $c"; fi

# A resumed session closed before it took a snapshot of its own resumes again, from the snapshot
# it was made from (its workspace's last known state); once an uploaded archive was hydrated into
# one after its snapshot, there is nothing stored to resume from (409, control).
api DELETE "/v1/sessions/$S2"
api POST "/v1/sessions/$S2/resume" '{}'
rr="$ST $(jv '[r["resumed"], r["resumed_from"]["snapshot"]]')" S4=$(jv 'r["id"]')
S=$S4 ex cat /workspace/keep
rr_out=$OUT
mkdir -p "$T/up" && echo up >"$T/up/u" && tar -C "$T/up" -cf "$T/up.tar" . && chmod a+r "$T/up.tar"
api POST "/v1/sessions/$S4/hydrate" "@$T/up.tar"
hy=$ST
api DELETE "/v1/sessions/$S4"
api POST "/v1/sessions/$S4/resume" '{}'
after_upload="$ST $R"
if [ "$rr" = "201 [\"snapshot\", \"$REF\"]" ] && [ "$rr_out" = "kept-$MARK" ] && [ "$hy" = 200 ] &&
	[[ "$after_upload" == 409*"without a snapshot"* ]]; then
	ok "a resumed session that took no snapshot resumes again from the one it was made from; after an uploaded archive, 409 (control)"
else not_ok "a resumed session resumes again" "$rr out '$rr_out'; hydrate $hy; after the upload: $after_upload"; fi

# A strict session (its sandbox user uid 1000 owns /workspace and /workspace/out) resumes as the
# default one does (the control): the hydrate leaves the directories of the sandbox's layout as
# they are (never a chmod of /workspace/out), restores the files below them, and the layout
# stays strict's (/workspace/out the sandbox user's, mode 0755).
layout() { S=$1 ex sh -c 'cat /workspace/out/o /workspace/d/f; stat -c "%u %a" /workspace/out /workspace/d'; }
for pol in default strict; do
	api POST /v1/sessions "{\"image\": \"minimal\", \"policy\": \"$pol\", \"tenant\": \"tq\"}"
	P=$(jv 'r["id"]')
	S=$P ex sh -c "echo o-$pol > /workspace/out/o; chmod 0700 /workspace/out; mkdir -m 0750 /workspace/d; echo f-$pol > /workspace/d/f"
	layout "$P"
	before=$OUT
	api POST "/v1/sessions/$P/snapshots" '{}'
	snap="$ST"
	api DELETE "/v1/sessions/$P"
	api POST "/v1/sessions/$P/resume" '{}'
	rs="$snap $ST $(jv 'r["resumed"]')" P2=$(jv 'r["id"]') R2=$R
	out=
	[ "$ST" = 201 ] && layout "$P2" && out=$OUT
	uid=${before##*$'\n'}
	uid=${uid%% *}
	# The owner of the sandbox's own directory as the sandbox sees it before; after, the same,
	# /workspace/out keeps its layout's mode (0755) and d its snapshot's (0750).
	if [ $pol = strict ] && [ "$MODE" = subids ]; then
		# Rootless with subordinate ids the daemon reads and writes as the sandbox's root only:
		# strict's private /workspace/out (0700, uid 1000's) cannot be snapshotted (403), so
		# there is nothing to resume from (409) (docs/serve.md "Snapshots").
		[[ "$rs" == "403 409 "* ]] &&
			ok "rootless with subordinate ids, a strict session's private files are refused to a snapshot (403), and its resume says there is none (409)" ||
			not_ok "rootless with subordinate ids, a strict snapshot is refused" "$rs $(first_line "$R2")"
	elif [ "$rs" = "200 201 snapshot" ] &&
		[ "$out" = "o-$pol"$'\n'"f-$pol"$'\n'"$uid 755"$'\n'"$uid 750" ]; then
		ok "a $pol session resumes from its snapshot: its files back, /workspace/out left as its layout makes it (uid $uid, 0755)"
	else not_ok "a $pol session resumes" "$rs $(first_line "$R2"); before '$before' after '$out' $(first_line "$ERR")"; fi
done
# An uploaded tar naming the layout's directories (in, a mount; out) with other modes: they are
# left as they are, and the archive's files below out and its own directory are restored.
mkdir -p "$T/lay/in" "$T/lay/out" "$T/lay/e"
echo x > "$T/lay/out/x"
chmod 0700 "$T/lay/in" "$T/lay/out" "$T/lay/e"
tar -C "$T/lay" -cf "$T/lay.tar" .
chmod -R a+rX "$T/lay.tar"
api POST /v1/sessions '{"image": "minimal", "policy": "strict", "tenant": "tq"}'
P=$(jv 'r["id"]')
api POST "/v1/sessions/$P/hydrate" "@$T/lay.tar"
hy="$ST $R"
S=$P ex sh -c 'cat /workspace/out/x; stat -c "%a" /workspace/in /workspace/out /workspace/e'
if [ "$MODE" = subids ]; then
	# Rootless with subordinate ids, strict's /workspace/out is uid 1000's, a subordinate host id
	# the daemon cannot write as: the member below it is refused, named (403), and out is unchanged.
	[[ "$hy" == 403*"/workspace/out/x: Permission denied"* ]] && [ "$OUT" = "755"$'\n'"755" ] &&
		ok "rootless with subordinate ids, a hydrate into strict's /workspace/out is refused (403), the layout unchanged" ||
		not_ok "rootless with subordinate ids, a strict hydrate is refused" "$hy; out '$OUT'"
elif [[ "$hy" == 200* ]] && [ "$OUT" = "x"$'\n'"755"$'\n'"755"$'\n'"700" ]; then
	ok "a hydrate leaves the layout's directories (the mount /workspace/in, /workspace/out) as they are; the archive's own directory takes its mode (control)"
else not_ok "a hydrate leaves the layout alone" "$hy; out '$OUT' $(first_line "$ERR")"; fi
api DELETE "/v1/sessions/$P"

# Lost in a daemon's SIGKILL: the next daemon records it lost, and a resume makes it anew.
api POST /v1/sessions '{"image": "minimal", "tenant": "tq"}'
S=$(jv 'r["id"]')
ex sh -c "echo lost-$MARK > /workspace/l"
api POST "/v1/sessions/$S/snapshots" '{}'
LREF=$(jv 'r["ref"]')
kill -KILL "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
answers() { api GET /v1/stats; [ "$ST" = 200 ]; }
rbx_cmd serve --socket "$SOCK"
"${RBX_CMD[@]}" </dev/null >"$T/serve2.log" 2>&1 &
DPID=$!
if wait_for answers; then
	api POST "/v1/sessions/$S/resume" '{}'
	rs="$ST $(jv '[r["resumed"], r["tenant"], r["resumed_from"]["snapshot"], r["resumed_from"]["closed"]]')"
	S3=$(jv 'r["id"]')
	S=$S3 ex cat /workspace/l
	if [ "$rs" = "201 [\"snapshot\", \"tq\", \"$LREF\", \"daemon lost\"]" ] && [ "$OUT" = "lost-$MARK" ]; then
		ok "a session lost in a daemon's SIGKILL resumes, on the next daemon, from its last snapshot"
	else not_ok "a lost session resumes" "$rs; out '$OUT' $(first_line "$ERR")"; fi
else not_ok "a lost session resumes" "the daemon did not come back: $(first_line "$(cat "$T/serve2.log")")"; fi

kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
