#!/usr/bin/env bash
# Runs the test suites and ends with one line: `N passed, M failed[, K skipped]`; exits 1 if
# anything failed. Usage: run-all.sh [unit|fuzz|integration|vm|tests/integration/FILE.sh]...
# (default: unit fuzz integration, and vm when tests/vm/run.sh exists). Each integration file
# names its modes in a `# modes: root user unshare` line; RBX_MODES overrides them. In CI
# (CI=true) a suite that cannot run, a mode that cannot run, and an isolation check that
# skips without a host limit count as failures (tests/lib.sh), each with its reason.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0 skipped=0

# gap NAME REASON: something that could not run: a skip, or in CI a failure.
gap() {
	if [ "${CI:-}" = true ]; then
		echo "not ok - $1: $2, which fails in CI (CI=true)"
		failed=$((failed + 1))
	else
		echo "skip - $1: $2"
		skipped=$((skipped + 1))
	fi
}

count() { # count OUTPUT: adds the file's ok / not ok / skip lines to the totals
	local p f s
	p=$(grep -c '^ok - ' <<<"$1")
	f=$(grep -c '^not ok - ' <<<"$1")
	s=$(grep -c '^skip - ' <<<"$1")
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
	LAST_FAILED=$f
}

run_unit() {
	local bins=(build/unit/test_*) b out rc p f s
	if [ ! -e "${bins[0]}" ]; then
		gap unit "no unit test binaries in build/unit (make unit)"
		return
	fi
	for b in "${bins[@]}"; do
		[ -x "$b" ] || continue
		out=$(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
			UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$b" 2>&1)
		rc=$?
		p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -n 1)
		f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -n 1)
		s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' <<<"$out" | tail -n 1)
		p=${p:-0} f=${f:-0} s=${s:-0}
		# A crash (sanitizer abort) leaves no summary: count the binary as one failure.
		if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
		# Each skipped test by name, from the list cmocka prints after the count.
		awk -v bin="${b##*/}" '/^\[  SKIPPED \] [0-9]+ test/ { list = 1; next }
			list && /^\[  SKIPPED \] / { print "skip - unit " bin ": " $4 " (cmocka skip())" }' <<<"$out"
		if [ "$f" = 0 ]; then
			if [ "$s" = 0 ]; then echo "ok - unit ${b##*/} ($p tests)"
			else echo "ok - unit ${b##*/} ($p tests, $s skipped)"; fi
		else
			printf '%s\n' "$out" | sed 's/^/# /'
			echo "not ok - unit ${b##*/}: $f failed, exit $rc"
		fi
	done
}

run_file() {
	local file=$1 modes mode out rc
	modes=${RBX_MODES:-$(sed -n 's/^# modes: *//p' "$file" | head -n 1)}
	for mode in ${modes:-root}; do
		out=$(RBX_MODE=$mode bash "$file" 2>&1)
		rc=$?
		printf '%s\n' "$out"
		count "$out"
		if [ "$rc" != 0 ] && [ "$LAST_FAILED" = 0 ]; then
			echo "not ok - ${file##*/} [$mode]: exited $rc"
			failed=$((failed + 1))
		fi
	done
}

# The fuzz targets' kept inputs (tests/fuzz/corpus, tests/fuzz/regressions), each run once
# through its target built as a plain binary (build/fuzz-replay, `make test` builds them).
run_fuzz() {
	local t bin out rc files f targets
	targets=$(sed -n 's/^FUZZ_TARGETS *:= *//p' Makefile 2>/dev/null)
	[ -n "$targets" ] || gap fuzz "no FUZZ_TARGETS line in the Makefile"
	for t in $targets; do
		bin=build/fuzz-replay/fuzz_$t
		if [ ! -x "$bin" ]; then
			gap "fuzz $t" "$bin missing (make $bin)"
			continue
		fi
		files=()
		for f in tests/fuzz/corpus/"$t"/* tests/fuzz/regressions/"$t"/*; do
			[ -f "$f" ] && files+=("$f")
		done
		out=$(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
			UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$bin" ${files[@]+"${files[@]}"} 2>&1)
		rc=$?
		if [ "$rc" = 0 ]; then
			passed=$((passed + 1))
			echo "ok - fuzz $t: ${out##*$'\n'}"
		else
			failed=$((failed + 1))
			printf '%s\n' "$out" | tail -n 40 | sed 's/^/# /'
			echo "not ok - fuzz $t: exit $rc replaying its corpus and regressions"
		fi
	done
}

run_integration() {
	local f
	for f in tests/integration/*.sh; do
		[ -e "$f" ] && run_file "$f"
	done
}

run_vm() {
	local out rc last p f s
	out=$(tests/vm/run.sh 2>&1)
	rc=$?
	printf '%s\n' "$out"
	last=$(grep '^vm: [0-9]* passed, [0-9]* failed' <<<"$out" | tail -n 1)
	if [ -z "$last" ]; then
		echo "not ok - vm: no summary line (exit $rc)"
		failed=$((failed + 1))
		return
	fi
	p=$(sed 's/^vm: \([0-9]*\) passed.*/\1/' <<<"$last")
	f=$(sed 's/.* \([0-9]*\) failed.*/\1/' <<<"$last")
	s=$(sed -n 's/.* \([0-9]*\) skipped.*/\1/p' <<<"$last")
	passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
}

suites=("$@")
if [ ${#suites[@]} = 0 ]; then
	suites=(unit fuzz integration)
	[ -x tests/vm/run.sh ] && suites+=(vm)
fi
for s in "${suites[@]}"; do
	case $s in
	unit) run_unit ;;
	fuzz) run_fuzz ;;
	integration) run_integration ;;
	vm)
		if [ -x tests/vm/run.sh ]; then run_vm; else gap vm "tests/vm/run.sh missing"; fi
		;;
	*.sh) run_file "$s" ;;
	*)
		echo "run-all: unknown suite $s (unit|fuzz|integration|vm|FILE.sh)" >&2
		exit 2
		;;
	esac
done

summary="$passed passed, $failed failed"
[ "$skipped" != 0 ] && summary="$summary, $skipped skipped"
echo "$summary"
[ "$failed" = 0 ]
