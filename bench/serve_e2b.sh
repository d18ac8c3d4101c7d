#!/usr/bin/env bash
# `make bench-serve-e2b`: runbox serve through the e2b SDK against the native API (bench/serve_e2b.mjs),
# with the SDK pinned in tests/e2b installed by `npm ci` when node_modules is missing or stale.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "bench: node is missing (scripts/install-deps.sh build test)" >&2; exit 1; }
D=tests/e2b
if [ ! -f "$D/node_modules/.package-lock.json" ] || [ "$D/package-lock.json" -nt "$D/node_modules/.package-lock.json" ]; then
	(cd "$D" && npm ci --no-audit --no-fund)
fi
exec node bench/serve_e2b.mjs
