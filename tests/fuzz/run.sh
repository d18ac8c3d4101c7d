#!/usr/bin/env bash
# Runs each fuzz target (build/fuzz/fuzz_TARGET, `make fuzz`) for FUZZ_SECONDS (60) from its
# seed corpus and kept regressions; prints executions, CPU time and findings per target; new
# inputs go to build/fuzz/corpus/TARGET, crashes to build/fuzz/findings/TARGET. Exit 1 on a crash.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
secs=${FUZZ_SECONDS:-60}
status=0
for t in "$@"; do
	bin=build/fuzz/fuzz_$t
	[ -x "$bin" ] || { echo "fuzz $t: $bin missing (make fuzz)"; status=1; continue; }
	mkdir -p "build/fuzz/corpus/$t" "build/fuzz/findings/$t" "build/fuzz/tmp/$t"
	log=build/fuzz/$t.log
	TIMEFORMAT='%U %S'
	cpu=$({ time TMPDIR=$PWD/build/fuzz/tmp/$t "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
		-print_final_stats=1 -artifact_prefix="build/fuzz/findings/$t/" \
		"build/fuzz/corpus/$t" "tests/fuzz/corpus/$t" "tests/fuzz/regressions/$t" >"$log" 2>&1; } 2>&1)
	rc=$?
	rm -rf "build/fuzz/tmp/$t"
	cpu=$(awk '{ printf "%.1f", $1 + $2 }' <<<"${cpu##*$'\n'}")
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
	found=$(find "build/fuzz/findings/$t" -type f | wc -l)
	echo "fuzz $t: ${runs:-?} executions in ${cpu} s CPU (${secs} s wall), ${cov:-cov: ?}, exit $rc, $found finding(s) in build/fuzz/findings/$t"
	if [ "$rc" != 0 ] || [ "$found" != 0 ]; then
		grep -m 5 -E 'ERROR|property broken|SUMMARY' "$log" | sed 's/^/#   /'
		status=1
	fi
done
exit $status
