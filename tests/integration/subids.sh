#!/usr/bin/env bash
# Rootless with a subordinate id range (issue 2, item 3; newuidmap/newgidmap): uid 65534 gets
# an /etc/subuid and /etc/subgid entry, bound over the host's files in a private mount
# namespace of this test only (the host's files are never touched). The sandbox then has the
# caller's id plus the range, one map line per line of the owner's map; a strict-policy step
# (uid 1000, a subordinate id on the host) writes a 0600 file in a 0700 directory, and the
# harvest stores it (through runtime/sandbox/nsopen.c). Control: without the entry, one id only.
# modes: root
. "$(dirname "$0")/../lib.sh"
lib_init subids

if ! command -v newuidmap >/dev/null || ! command -v newgidmap >/dev/null; then
	skip "subordinate ids" "newuidmap/newgidmap missing (package uidmap)"
	exit 0
fi
name=$(getent passwd $NOBODY | cut -d: -f1)
[ -n "$name" ] || name=$NOBODY
printf '%s:300000:65536\n' "$name" >"$T/subuid"
cp "$T/subuid" "$T/subgid"
chmod 0644 "$T/subuid" "$T/subgid"
chown -R $NOBODY:$NOBODY "$T/scratch" "$STATE" "$T/xdg" "$T/home"
chmod -R a+rX "$T"

# in_ns WITH_ENTRY CMD...: CMD as 65534, in a mount namespace where /etc/subuid and
# /etc/subgid are this test's (WITH_ENTRY=1) or empty files (0).
in_ns() {
	local with=$1
	shift
	local src=$T/subuid srcg=$T/subgid
	if [ "$with" = 0 ]; then
		: >"$T/empty"
		chmod 0644 "$T/empty"
		src=$T/empty srcg=$T/empty
	fi
	unshare -m --propagation private sh -c 'mount --bind "$1" /etc/subuid && mount --bind "$2" /etc/subgid && shift 2 && exec "$@"' \
		sh "$src" "$srcg" setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all \
		env -i "PATH=$SAFE_PATH" "HOME=$T/home" "RUNBOX_STATE_DIR=$STATE" "XDG_RUNTIME_DIR=$T/xdg" "$@"
}

map_lines() { grep -c . "$1"; }

in_ns 1 "$RUNBOX" run --image minimal --policy strict -- /bin/sh -c 'id -u; cat /proc/self/uid_map' >"$T/with" 2>"$T/with.err"
rc=$?
if [ $rc = 0 ] && [ "$(head -n 1 "$T/with")" = 1000 ] && [ "$(tail -n +2 "$T/with" | grep -c .)" = 2 ]; then
	ok "with a range: uid 1000 inside, two map lines (the caller, then the range)"
else
	not_ok "with a range: uid 1000 inside, two map lines" "exit $rc: $(tr '\n' ' ' <"$T/with") $(first_line "$(cat "$T/with.err")")"
fi
in_ns 0 "$RUNBOX" run --image minimal --policy strict -- /bin/sh -c 'id -u; cat /proc/self/uid_map' >"$T/without" 2>"$T/without.err"
rc=$?
if [ $rc = 0 ] && [ "$(tail -n +2 "$T/without" | grep -c .)" = 1 ]; then
	ok "control: without an entry, one map line"
else
	not_ok "control: without an entry, one map line" "exit $rc: $(tr '\n' ' ' <"$T/without")"
fi

cat >"$T/scratch/m.json" <<'EOF'
{"tenant": "t", "agent": "subids", "image": "minimal", "policy": "strict",
 "steps": [{"name": "private", "script": "mkdir -p /workspace/out/closed; echo private-data-7f3a > /workspace/out/closed/f; chmod 600 /workspace/out/closed/f; chmod 700 /workspace/out/closed; echo pub > /workspace/out/pub"}]}
EOF
chmod a+r "$T/scratch/m.json"
in_ns 1 "$RUNBOX" run --json "$T/scratch/m.json" >"$T/m.out" 2>"$T/m.err"
rc=$?
arts=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1])); h=r["steps"][0]["harvest"]; print(" ".join(sorted(a["path"] for a in h["artifacts"])), len(h["skipped"]))' "$T/m.out" 2>/dev/null)
if [ $rc = 0 ] && [ "$arts" = "closed/f pub 0" ]; then
	ok "a sandbox user's 0600 file in a 0700 directory is harvested"
else
	not_ok "a sandbox user's 0600 file in a 0700 directory is harvested" "exit $rc, artifacts+skips: '$arts' $(first_line "$(cat "$T/m.err")")"
fi
