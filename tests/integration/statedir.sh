#!/usr/bin/env bash
# The state directory and the artifact store keep their modes: runbox never changes the mode of
# a directory it did not create (a 0700 parent of the state directory stays 0700); where the
# sandbox's root is another host id (as root) and cannot search such a parent, the run fails
# with exit 125 naming it and the fix. The store's shard directories are searchable but not
# listable, and an artifact still reaches a later run as an input.
# modes: root user unshare subids
. "$(dirname "$0")/../lib.sh"
lib_init statedir

as_mode() { if [ "$MODE" = root ]; then "$@"; else as_nobody "$@"; fi; }

# A state directory below a 0700 directory of the caller's own.
P=${T:?}/private
mkdir -p "$P/state"
chmod 0700 "$P"
[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$P"
# run_in STATE_DIR: one step, with that state directory (and its own run directory below it).
run_in() {
	rbx_cmd run --image minimal -- /bin/true
	local i
	for i in "${!RBX_CMD[@]}"; do
		[ "${RBX_CMD[$i]}" = "RUNBOX_STATE_DIR=$STATE" ] && RBX_CMD[$i]="RUNBOX_STATE_DIR=$1"
	done
	"${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
	ERR=$(cat "$T/err")
}
run_in "$P/state"
mode=$(stat -c %a "$P")
if [ "$MODE" = root ]; then
	# The sandbox's root is a subordinate id: it cannot search P, and runbox says so.
	if [ "$RC" = 125 ] && grep -qF "\`$P\` (mode 0700) is not searchable" <<<"$ERR" && grep -q "chmod o+x" <<<"$ERR" &&
		[ "$mode" = 700 ]; then
		ok "a 0700 parent of the state directory is not chmod'ed: exit 125 naming it and the fix"
	else not_ok "a 0700 parent of the state directory is not chmod'ed" "exit $RC, mode $mode: $(first_line "$ERR")"; fi
	# Control: made searchable by its owner (explicitly), the same run works; its mode stays.
	chmod 0711 "$P"
	run_in "$P/state"
	mode=$(stat -c %a "$P")
	if [ "$RC" = 0 ] && [ "$mode" = 711 ]; then ok "control: with the parent searchable (0711, set by its owner) the run works"
	else not_ok "control: with the parent searchable the run works" "exit $RC, mode $mode: $(first_line "$ERR")"; fi
else
	# Rootless, the sandbox's root is the caller: the run works and P stays private.
	if [ "$RC" = 0 ] && [ "$mode" = 700 ]; then ok "rootless: a state directory below a 0700 directory works, which stays 0700"
	else not_ok "rootless: a state directory below a 0700 directory works, which stays 0700" "exit $RC, mode $mode: $(first_line "$ERR")"; fi
fi
# Directories runbox creates itself (the state and run directories here) are 0711.
rm -rf "${T:?}/fresh"
mkdir -p "$T/fresh"
[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/fresh"
run_in "$T/fresh/a/b"
m1=$(stat -c %a "$T/fresh/a" 2>/dev/null) m2=$(stat -c %a "$T/fresh/a/b/run" 2>/dev/null)
if [ "$RC" = 0 ] && [ "$m1" = 711 ] && [ "$m2" = 711 ]; then ok "directories runbox creates for the run are 0711"
else not_ok "directories runbox creates for the run are 0711" "exit $RC, modes $m1 $m2: $(first_line "$ERR")"; fi

# The artifact store: a harvested file's shard directory is 0711 (another user cannot list
# it; the control: it can list a 0755 directory the test makes), and the object is still
# bound into a later run as an input.
printf '{"tenant": "acme", "agent": "a1", "image": "minimal",
 "steps": [{"script": "mkdir -p /workspace/out && echo stored-%s > /workspace/out/a.txt"}]}\n' "$$" >"$T/store.json"
run_rbx run "$T/store.json" --json
digest=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["steps"][0]["harvest"]["artifacts"][0]["digest"])' "$T/out" 2>/dev/null)
hex=${digest#sha256:}
shard=$STATE/artifacts/sha256/${hex:0:2}
if [ -z "$hex" ]; then not_ok "the store's shard directory is 0711" "no artifact (exit $RC: $(first_line "$ERR"))"
else
	smode=$(stat -c %a "$shard")
	mkdir -p "$T/listable" && chmod 0755 "$T/listable"
	other=$NOBODY
	[ "$MODE" = root ] || other=65533
	if setpriv --reuid=$other --regid=$other --clear-groups ls "$T/listable" >/dev/null 2>&1; then ctl=0; else ctl=1; fi
	if setpriv --reuid=$other --regid=$other --clear-groups ls "$shard" >/dev/null 2>&1; then listed=1; else listed=0; fi
	if [ $ctl != 0 ]; then skip "the store's shard directory is 0711, not listable by others" "control: uid $other cannot list a 0755 directory"
	elif [ "$smode" = 711 ] && [ $listed = 0 ]; then ok "the store's shard directory is 0711, not listable by others"
	else not_ok "the store's shard directory is 0711, not listable by others" "mode $smode, listed by uid $other: $listed"; fi
	printf '{"tenant": "acme", "agent": "a1", "image": "minimal",
 "inputs": [{"artifact": "%s", "to": "/workspace/in/a.txt"}],
 "steps": [{"script": "cat /workspace/in/a.txt"}]}\n' "$digest" >"$T/reuse.json"
	run_rbx run "$T/reuse.json" --json
	if [ "$RC" = 0 ] && grep -q "stored-$$" <<<"$OUT"; then ok "an artifact is still bound into a later run as an input"
	else not_ok "an artifact is still bound into a later run as an input" "exit $RC: $(first_line "$ERR")"; fi
fi

# A state directory an earlier run made (its run directory elsewhere, as root's default
# /run/runbox) serves a later run whose run directory is below it: runbox makes it 0711 (not
# 0700, as the seccomp cache and the ledger did as its parent). Root only: rootless, the
# sandbox's root is the caller. Control: the same later run in a directory the caller made
# 0700 fails (above).
if [ "$MODE" = root ]; then
	F=$T/fresh-state
	mkdir -p "$T/elsewhere" && chmod 0711 "$T/elsewhere"
	env -i "PATH=$SAFE_PATH" "HOME=$T/home" "RUNBOX_STATE_DIR=$F" "RUNBOX_RUN_DIR=$T/elsewhere/run" \
		"$RUNBOX" run --image minimal -- /bin/true </dev/null >/dev/null 2>"$T/lerr"
	lrc=$?
	fmode=$(stat -c %a "$F" 2>/dev/null)
	run_in "$F"
	if [ $lrc != 0 ]; then not_ok "a state directory an earlier run made serves a later run" "first run exit $lrc: $(first_line "$(cat "$T/lerr")")"
	elif [ -e "$F/run" ] && [ "$RC" = 0 ] && [ "$fmode" = 711 ]; then ok "a state directory an earlier run made (0711) serves a later run below it"
	else not_ok "a state directory an earlier run made serves a later run" "mode $fmode, run exit $RC: $(first_line "$ERR")"; fi
fi

# Whatever command is first on a fresh state directory makes it 0711, not only a run: an image
# import first (its store below is private, 0700) leaves it searchable, and a run on the image
# then works. Root only, as above. Control: the store directory itself is 0700.
if [ "$MODE" = root ]; then
	I=$T/import-first
	mkdir -p "$T/imgsrc" && chmod 0755 "$T/imgsrc"
	tar -cf "$T/imgsrc/m.tar" -C "$ROOT/build/images/minimal/rootfs" .
	policy_variant default "$T/imgsrc/allow.json" statedir-import "p['images'] = {'allow': ['$T/imgsrc']}"
	env -i "PATH=$SAFE_PATH" "HOME=$T/home" "RUNBOX_STATE_DIR=$I" \
		"$RUNBOX" image import "$T/imgsrc/m.tar" --name first --policy "$T/imgsrc/allow.json" </dev/null >/dev/null 2>"$T/ierr"
	irc=$?
	imode=$(stat -c %a "$I" 2>/dev/null) smode=$(stat -c %a "$I/images/store" 2>/dev/null)
	env -i "PATH=$SAFE_PATH" "HOME=$T/home" "RUNBOX_STATE_DIR=$I" \
		"$RUNBOX" run --image first -- /bin/true </dev/null >/dev/null 2>"$T/err"
	RC=$?
	if [ $irc != 0 ]; then not_ok "a state directory an image import made serves a run" "import exit $irc: $(first_line "$(cat "$T/ierr")")"
	elif [ "$imode" = 711 ] && [ "$smode" = 700 ] && [ "$RC" = 0 ]; then
		ok "a state directory an image import made first is 0711 (its store 0700) and a run on the image works"
	else not_ok "a state directory an image import made serves a run" "modes $imode/$smode, run exit $RC: $(first_line "$(cat "$T/err")")"; fi
fi
