# Shared helpers for the integration tests (bash). Each test file sources this, calls
# lib_init, and reports one TAP-like line per check: `ok - NAME`, `not ok - NAME: why`,
# `skip - NAME: reason`. RBX_MODE picks how runbox is run: root, user (uid 65534 through
# setpriv) or unshare (uid 65534, then `unshare -r`, so runbox is "root" in a user namespace),
# or subids (uid 65534 with a subordinate id range: newuidmap, and /etc/subuid and
# /etc/subgid entries bound over the host's files in a private mount namespace of the test).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RUNBOX=${RUNBOX:-$ROOT/runbox}
PROBE=$ROOT/build/probe
MINIMAL=$ROOT/build/images/minimal/rootfs
MODE=${RBX_MODE:-root}
NOBODY=65534
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
SAFE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EPERM=1 ENOENT=2 EBADF=9 EACCES=13 ENOTTY=25 EROFS=30 ENOSYS=38 EAFNOSUPPORT=97

# One tag per file and mode, so the aggregated output says where a line came from.
TAG=""
T=""
STATE=""

ok() { echo "ok - $TAG$1"; }
not_ok() { echo "not ok - $TAG$1${2:+: $2}"; }
# skip NAME REASON: the check could not tell here. In CI (CI=true) a file that sets
# STRICT_SKIPS=1 (isolation) gets a failure instead: there, a skip hides a gap unless it is a
# host_limit. host_limit NAME REASON: a skip that stays one in CI; only for a host that
# positively lacks the feature (REASON says how that was established) while the property was
# still seen to hold inside.
skip() {
	if [ "${CI:-}" = true ] && [ -n "${STRICT_SKIPS:-}" ]; then
		echo "not ok - $TAG$1: skipped, which fails in CI (CI=true)${2:+: $2}"
	else echo "skip - $TAG$1${2:+: $2}"; fi
}
host_limit() { echo "skip - $TAG$1: host limit: $2"; }
note() { echo "# $*"; }

NOBODY_CTL="setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all"
as_nobody() {
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all "$@"
}

# Why this mode cannot run here, or nothing when it can.
mode_unavailable() {
	[ "$(id -u)" = 0 ] || { echo "the tests must start as root (they drop to uid $NOBODY)"; return; }
	[ -x "$RUNBOX" ] || { echo "no runbox binary at $RUNBOX (make runbox)"; return; }
	[ -x "$PROBE" ] || { echo "no probe at $PROBE (make build/probe)"; return; }
	[ -x "$MINIMAL/bin/busybox" ] || { echo "no minimal image at $MINIMAL (make all)"; return; }
	case $MODE in
	root) ;;
	user | unshare | subids)
		command -v setpriv >/dev/null || { echo "setpriv missing (util-linux)"; return; }
		if [ "$MODE" = subids ]; then
			command -v newuidmap >/dev/null && command -v newgidmap >/dev/null ||
				{ echo "newuidmap/newgidmap missing (package uidmap)"; return; }
		fi
		as_nobody test -x "$RUNBOX" -a -r "$MINIMAL/bin/busybox" -a -r "$ROOT/policy/profiles/default.json" ||
			{ echo "uid $NOBODY cannot read $ROOT (make the checkout world-readable)"; return; }
		as_nobody unshare -U true 2>/dev/null ||
			{ echo "unprivileged user namespaces are disabled on this host"; return; }
		if [ "$MODE" = unshare ]; then
			as_nobody unshare -r true 2>/dev/null || { echo "unshare -r fails for uid $NOBODY"; return; }
		fi
		;;
	*) echo "unknown RBX_MODE $MODE (root|user|unshare|subids)" ;;
	esac
}

lib_cleanup() {
	[ -n "$T" ] && [ -d "$T" ] && rm -rf --one-file-system "$T" 2>/dev/null
	return 0
}

# lib_init NAME: sets TAG, the scratch dir T (owned by the mode's user) and STATE; ends the
# file with one skip line when the mode cannot run on this host.
lib_init() {
	TAG="$1 [$MODE] "
	local why
	why=$(mode_unavailable)
	if [ -n "$why" ]; then
		# In CI every mode a file names must run: a mode that cannot is a failure there.
		if [ "${CI:-}" = true ]; then echo "not ok - $1 [$MODE]: this mode cannot run, which fails in CI (CI=true): $why"
		else echo "skip - $1 [$MODE]: $why"; fi
		exit 0
	fi
	T=$(mktemp -d /tmp/rbx-it.XXXXXX)
	chmod 0755 "$T"
	STATE=$T/state
	mkdir -p "$STATE" "$T/xdg" "$T/home" "$T/scratch"
	chmod 0700 "$T/xdg"
	[ "$MODE" = root ] || chown -R $NOBODY:$NOBODY "$STATE" "$T/xdg" "$T/home"
	if [ "$MODE" = subids ]; then
		local name
		name=$(getent passwd $NOBODY | cut -d: -f1)
		printf '%s:300000:65536\n' "${name:-$NOBODY}" >"$T/subuid"
		cp "$T/subuid" "$T/subgid"
		chmod 0644 "$T/subuid" "$T/subgid"
	fi
	trap lib_cleanup EXIT
}

# The runbox serve client of the serve tests: SOCK, the daemon's default socket in this test's
# XDG_RUNTIME_DIR (a test may point it elsewhere); CLIENT, the mode's user for curl.
# api METHOD PATH [BODY]: one call on $SOCK; sets ST (the status) and R (the body).
# jv PYEXPR: PYEXPR of r, R parsed as JSON (a string as it is, anything else as JSON).
serve_client() {
	SOCK=$T/xdg/runbox/serve.sock
	CLIENT=()
	[ "$MODE" = root ] || CLIENT=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all)
}
api() {
	local out
	out=$("${CLIENT[@]}" curl -s -w '\n%{http_code}' --max-time 120 --unix-socket "$SOCK" \
		-X "$1" ${3+--data-binary "$3"} "http://runbox$2")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
# upload METHOD PATH FILE: FILE as the body, streamed (curl -T); sets ST and R.
upload() {
	local out
	out=$("${CLIENT[@]}" curl -s -w '\n%{http_code}' --max-time 120 --unix-socket "$SOCK" \
		-X "$1" -H 'Content-Type: application/octet-stream' -T "$3" "http://runbox$2")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
jv() { "$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(v if isinstance(v,str) else json.dumps(v))' "$R" "$1" 2>/dev/null; }
# serve_keys JSON: the daemon's TCP keys file, $T/keys.json, holding JSON: 0600, the mode's user's.
serve_keys() {
	printf '%s\n' "$1" >"$T/keys.json"
	chmod 0600 "$T/keys.json"
	[ "$MODE" = root ] || chown $NOBODY:$NOBODY "$T/keys.json"
}
# tcp KEY METHOD PATH [BODY]: one call on the daemon's TCP listener (127.0.0.1:$PORT) with KEY
# as its bearer key (none when empty); sets ST and R.
tcp() {
	local out key=$1
	shift
	out=$(curl -s -w '\n%{http_code}' --max-time 60 ${key:+-H "Authorization: Bearer $key"} \
		-X "$1" ${3+--data-binary "$3"} "http://127.0.0.1:$PORT$2")
	ST=${out##*$'\n'}
	R=${out%$'\n'*}
}
# serve_start LOG [ARGS...]: runbox serve on $SOCK (and ARGS) in the background, its output in
# $T/LOG, DPID its pid; returns once the socket is there, or reports not_ok, stops it and fails.
serve_start() {
	local log=$T/$1
	shift
	rbx_cmd serve --socket "$SOCK" "$@"
	"${RBX_CMD[@]}" </dev/null >"$log" 2>&1 &
	DPID=$!
	wait_for test -S "$SOCK" && return 0
	not_ok "runbox serve${*:+ $*} listens" "$(first_line "$(cat "$log")")"
	kill "$DPID" 2>/dev/null
	return 1
}

# rbx_cmd ARGS...: sets RBX_CMD to the command line that runs runbox in the current mode
# with a small, known environment (plus the NAME=value words in the array RBX_ENV, when set);
# rbx ARGS... runs it.
rbx_cmd() {
	RBX_CMD=(env -i "PATH=$SAFE_PATH" "HOME=$T/home" "RUNBOX_STATE_DIR=$STATE"
		"XDG_RUNTIME_DIR=$T/xdg" ${RBX_ENV[@]+"${RBX_ENV[@]}"})
	case $MODE in
	root) RBX_CMD+=("$RUNBOX" "$@") ;;
	user) RBX_CMD=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all
		"${RBX_CMD[@]}" "$RUNBOX" "$@") ;;
	unshare) RBX_CMD=(setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups --inh-caps=-all
		"${RBX_CMD[@]}" unshare -r "$RUNBOX" "$@") ;;
	subids)
		# shellcheck disable=SC2016 # $1.. belong to the inner sh
		RBX_CMD=(unshare -m --propagation private sh -c
			'mount --bind "$1" /etc/subuid && mount --bind "$2" /etc/subgid && shift 2 && exec "$@"'
			sh "$T/subuid" "$T/subgid" setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups
			--inh-caps=-all "${RBX_CMD[@]}" "$RUNBOX" "$@") ;;
	esac
}
rbx() {
	rbx_cmd "$@"
	"${RBX_CMD[@]}"
}

# run_rbx ARGS...: rbx with stdin from /dev/null; sets RC, OUT, ERR.
run_rbx() {
	rbx "$@" <"${RBX_STDIN:-/dev/null}" >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

# sb [RUN-OPTIONS] -- CMD...: one step in the minimal image.
sb() { run_rbx run --image minimal "$@"; }

first_line() { printf '%s' "$1" | head -n 1 | cut -c 1-200; }

# json FILE PATH: the value at a dotted PATH (a.b.c) of the JSON object in FILE; strings raw,
# other values as JSON (true, false, null, numbers); exit 1 when the path is missing.
json() {
	"$PY" - "$1" "$2" <<'EOF'
import json, sys
try:
    v = json.load(open(sys.argv[1]))
except Exception as e:
    print("bad JSON: %s" % e, file=sys.stderr); sys.exit(2)
for k in sys.argv[2].split("."):
    if not isinstance(v, dict) or k not in v:
        sys.exit(1)
    v = v[k]
print(v if isinstance(v, str) else json.dumps(v))
EOF
}

# expect_json NAME PATH VALUE: the last --json output ($T/out) has PATH == VALUE.
expect_json() {
	local got
	if ! got=$(json "$T/out" "$2" 2>&1); then
		not_ok "$1" "no $2 in the result (exit $RC; $(first_line "$ERR"))"
	elif [ "$got" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1" "$2 is $got, want $3"
	fi
}

# matches CODE WANT: WANT is one code, alternatives "1|97", or "nz" (any failure).
matches() {
	local c=$1 w
	if [ "$2" = nz ]; then
		[ "$c" != 0 ]
		return
	fi
	IFS='|' read -ra alts <<<"$2"
	for w in "${alts[@]}"; do [ "$c" = "$w" ] && return 0; done
	return 1
}

# control WANT CMD...: runs CMD on the host (as root) and sets CTRL to its exit code;
# returns 0 when it equals WANT.
control() {
	local want=$1
	shift
	# Through sh, so a control killed by a signal is reported there, not by this shell.
	sh -c '"$@"; exit $?' sh "$@" >"$T/ctrl.out" 2>&1 </dev/null
	CTRL=$?
	matches "$CTRL" "$want"
}

# pair NAME INSIDE [RUN-OPTIONS] -- PROBE-ARGS: the probe inside the sandbox must exit with
# INSIDE, or the check fails, whatever the control says; the same probe outside, as root
# (wrapped in $CTRL_WRAP, or the command $CTRL_CMD), must exit with $CTRL_WANT (default 0), or
# the test cannot tell and is skipped. A host that lacks the feature: when the control exits
# $CTRL_ABSENT, the probe exits the same inside (the call cannot be made there either) and
# that is a host_limit, $CTRL_ABSENT_WHY saying why.
pair() {
	local name=$1 want=$2
	shift 2
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	local cw=${CTRL_WANT:-0}
	if [ -n "${CTRL_CMD:-}" ]; then
		# shellcheck disable=SC2086
		control "$cw" $CTRL_CMD
	else
		# shellcheck disable=SC2086
		control "$cw" ${CTRL_WRAP:-} "$PROBE" "$@"
	fi
	local crc=$?
	sb "${opts[@]}" -- /bin/probe "$@"
	if [ "$RC" = 125 ] || [ "$RC" = 126 ] || [ "$RC" = 127 ]; then
		not_ok "$name" "runbox exit $RC: $(first_line "$ERR")"
	elif ! matches "$RC" "$want"; then
		if [ -n "${CTRL_ABSENT:-}" ] && matches "$CTRL" "$CTRL_ABSENT" && [ "$RC" = "$CTRL" ]; then
			host_limit "$name" "${CTRL_ABSENT_WHY:-the host lacks it}: the probe exits $CTRL outside and inside"
		else not_ok "$name" "inside: exit $RC, want $want ($(first_line "$ERR"))"; fi
	elif [ $crc != 0 ]; then
		skip "$name" "control cannot tell: outside the probe exits $CTRL, want $cw ($(first_line "$(cat "$T/ctrl.out")")); inside: exit $RC"
	elif matches "$CTRL" "$want"; then
		skip "$name" "control cannot tell: outside also exits $CTRL"
	else
		ok "$name"
	fi
}

# allowed NAME [RUN-OPTIONS] -- PROBE-ARGS: something the policy must still allow.
allowed() {
	local name=$1
	shift
	local opts=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		opts+=("$1")
		shift
	done
	shift
	sb "${opts[@]}" -- /bin/probe "$@"
	if [ "$RC" = 0 ]; then ok "$name"; else not_ok "$name" "inside: exit $RC ($(first_line "$ERR"))"; fi
}

# Host pids whose command line contains TEXT (with --prefix: starts with it). The glob is
# expanded before grep starts, so grep never finds its own command line.
pids_with() {
	local prefix="" f args
	[ "$1" = --prefix ] && { prefix=1; shift; }
	# cmdline separates words with NULs: grep for the last word, then compare in bash.
	for f in $(grep -lsaF -- "${1##* }" /proc/[0-9]*/cmdline); do
		{ mapfile -d '' args <"$f"; } 2>/dev/null || continue
		if [ -n "$prefix" ]; then
			[[ "${args[*]}" == "$1"* ]] || continue
		else
			[[ "${args[*]}" == *"$1"* ]] || continue
		fi
		f=${f#/proc/}
		echo "${f%/cmdline}"
	done
	return 0
}

# wait_for CMD...: retries CMD up to 100 times 0.1 s apart (a bound, not a timed assertion).
wait_for() {
	local i
	for i in $(seq 100); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

has_marker() { [ -n "$(pids_with "$@")" ]; }
no_marker() { [ -z "$(pids_with "$@")" ]; }

new_marker() { echo "rbxmark-$$-$RANDOM$RANDOM"; }

# policy_variant PROFILE OUT NAME CHANGE: a copy of the shipped policy/profiles/PROFILE.json
# named NAME, with the Python statement CHANGE applied to it (as p), written to OUT, readable by
# every mode's user.
policy_variant() {
	"$PY" - "$ROOT/policy/profiles/$1.json" "$2" "$3" "$4" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
p["name"] = sys.argv[3]
exec(sys.argv[4])
json.dump(p, open(sys.argv[2], "w"))
EOF
	chmod a+r "$2"
}

# run_manifest FILE [SECONDS [SIGNAL]]: `runbox run FILE`, sent SIGNAL (TERM) after SECONDS
# (120) and KILL 5 s later; KILL at once shows a hung runbox as exit 137 with no result. Sets
# RC, OUT, ERR; the result is in $T/out.
run_manifest() {
	rbx_cmd run "$1" --json
	timeout -k 5 -s "${3:-TERM}" "${2:-120}" "${RBX_CMD[@]}" </dev/null >"$T/out" 2>"$T/err"
	RC=$?
	OUT=$(cat "$T/out")
	ERR=$(cat "$T/err")
}

# rj EXPR: EXPR evaluated in Python with r = the result in $T/out (and json, os); prints it.
rj() {
	"$PY" - "$T/out" "$1" <<'EOF' 2>/dev/null
import json, os, sys
r = json.load(open(sys.argv[1]))
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v, sort_keys=True))
EOF
}

# check NAME EXPR [WHY-EXPR]: ok when EXPR is true of the result; else not ok with WHY-EXPR.
check() {
	local got
	got=$(rj "bool($2)")
	if [ "$got" = true ]; then ok "$1"
	elif [ -z "$got" ]; then not_ok "$1" "no result, or no such field in it (exit $RC; $(first_line "$ERR"))"
	else not_ok "$1" "$(rj "${3:-'false'}" | cut -c 1-300)"; fi
}

# report LINES [CONTEXT]: a checker's tab-separated lines become results: "ok NAME",
# "not_ok NAME WHY" (CONTEXT appended to WHY); "TOKEN VALUE" sets TOKEN.
report() {
	local st name why
	while IFS=$'\t' read -r st name why; do
		case $st in
		ok) ok "$name" ;;
		not_ok) not_ok "$name" "$why${2:+ $2}" ;;
		TOKEN) TOKEN=$name ;;
		esac
	done <<<"$1"
}
