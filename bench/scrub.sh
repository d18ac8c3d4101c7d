#!/usr/bin/env bash
# Scrubber throughput (issue 5, item 8): builds bench/scrub_bench.c against the scrubber,
# generates >= 200 MB of mixed text with planted secrets, prints rb_scrub_buffer's MB/s, the
# recall on the planted secrets, and the ratio to `grep -E -c -f bench/scrub_patterns.txt`.
# Knob: SCRUB_BENCH_MB (200). Results and the binary land in build/bench/.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p "$OUT"
# the format and keyword tables, written at build time (Makefile, SCRUB_TABLES)
make -s build/gen/scrub_tables.c
MB=${SCRUB_BENCH_MB:-200}
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
gcc -std=gnu17 -O2 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -I. \
	-o "$OUT/scrub_bench" bench/scrub_bench.c scrub/scrub.c scrub/rules.c scrub/keyword.c scrub/prefilter.c build/gen/scrub_tables.c common/error.c \
	$(pkg-config --cflags --libs jansson) -lm
"$OUT/scrub_bench" "$OUT" bench/scrub_patterns.txt "$MB" | tee "$OUT/scrub.txt"
