#!/usr/bin/env bash
# runbox serve's E2B-compatible API (docs/e2b.md) with the unmodified e2b SDK: tests/e2b (node:test),
# its pinned e2b installed by `npm ci` when node_modules is missing or older than the lock file.
# Each node test is one line here; every one has its control inside (tests/e2b/sdk.test.mjs).
# modes: root user
. "$(dirname "$0")/../lib.sh"
lib_init e2b

DIR=$ROOT/tests/e2b
# The SDK's own floor (its package.json engines): node >= 20.18.1.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	not_ok "node and npm are installed" "missing (scripts/install-deps.sh test installs Debian's nodejs and npm)"
	exit 0
fi
if ! node -e 'const [a,b,c]=process.versions.node.split(".").map(Number); process.exit(a>20||(a===20&&(b>18||(b===18&&c>=1)))?0:1)'; then
	not_ok "node is at least 20.18.1 (the e2b SDK's floor)" "node $(node --version)"
	exit 0
fi
if [ ! -f "$DIR/node_modules/.package-lock.json" ] || [ "$DIR/package-lock.json" -nt "$DIR/node_modules/.package-lock.json" ]; then
	if ! out=$(cd "$DIR" && npm ci --no-audit --no-fund 2>&1); then
		not_ok "npm ci installs the pinned e2b SDK" "$(tail -n 3 <<<"$out" | tr '\n' ' ')"
		exit 0
	fi
fi
ver=$(node -p 'require(process.argv[1]).version' "$DIR/node_modules/e2b/package.json" 2>/dev/null)
if [ "$ver" = 2.51.0 ]; then ok "the e2b SDK is the pinned 2.51.0"; else not_ok "the e2b SDK is the pinned 2.51.0" "found '$ver'"; fi

# The leaf tests (indented) of node's TAP output become this file's lines; a run that fails
# without a failing test (a crash, a hang cut by the timeout) is a failure too.
# user mode: the daemon and every runbox command as uid 65534 (rootless); the SDK stays the test's.
uid=""
[ "$MODE" = user ] && uid=$NOBODY
out=$(cd "$DIR" && RUNBOX_BIN=$RUNBOX RBX_E2B_UID=$uid timeout 900 node --test --test-reporter=tap --test-timeout=180000 \
	--test-concurrency=1 sdk.test.mjs 2>&1)
rc=$?
fails=0
while IFS= read -r line; do
	if [[ "$line" =~ ^\ {4}ok\ [0-9]+\ -\ (.*)$ ]]; then
		ok "${BASH_REMATCH[1]}"
	elif [[ "$line" =~ ^\ {4}not\ ok\ [0-9]+\ -\ (.*)$ ]]; then
		fails=$((fails + 1))
		not_ok "${BASH_REMATCH[1]}" "node:test output below"
	fi
done <<<"$out"
if [ "$fails" != 0 ] || [ "$rc" != 0 ]; then
	printf '%s\n' "$out" | grep -vE '^\s+(at |\.\.\.)' | tail -n 80 | sed 's/^/# /'
	[ "$fails" = 0 ] && not_ok "node --test sdk.test.mjs" "exit $rc without a failing test"
fi
