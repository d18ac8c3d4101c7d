#!/usr/bin/env bash
# Per-step overhead of a multi-step run: a manifest of 1 step and one of 21 steps (each
# `true`), timed by hyperfine in one run; prints (t21 - t1) / 20 per step. Every step pays its
# exec round trip, its ledger commit (fsync) and its harvest of /workspace/out.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=build/bench/steps
mkdir -p "$OUT"
mk() {
	local n=$1 f=$OUT/steps-$1.json
	{
		printf '{"tenant":"bench","agent":"steps","image":"minimal","policy":"default","steps":['
		for i in $(seq 1 "$n"); do
			[ "$i" -gt 1 ] && printf ','
			printf '{"script":"true"}'
		done
		printf ']}\n'
	} >"$f"
	echo "$f"
}
one=$(mk 1)
many=$(mk 21)
state=$(mktemp -d)
chmod 0711 "$state" # the run directory beneath it: searchable by the sandbox's ids (as root)
trap 'rm -rf "$state"' EXIT
RUNS=${BENCH_STEPS_RUNS:-20}
RUNBOX_STATE_DIR=$state hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$OUT/steps.json" \
	"./runbox run $one" "./runbox run $many" >&2
python3 - "$OUT/steps.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
m1, m21 = r[0]["median"] * 1000, r[1]["median"] * 1000
print(f"multi-step run: 1 step {m1:.1f} ms, 21 steps {m21:.1f} ms (medians); "
      f"per-step overhead {(m21 - m1) / 20:.2f} ms")
PY
