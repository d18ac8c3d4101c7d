#!/usr/bin/env bash
# make bench-scrub: recall per family, false positives and MB/s of the scrubber on a corpus
# of its own (bench/scrub_corpus.py: synthetic secrets of each documented format, bare and in
# context, plus negatives). Knobs: SCRUB_EVAL_MB (100), SCRUB_EVAL_SEED (18). Output in build/bench/.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT=build/bench
mkdir -p "$OUT"
# the format and keyword tables, written at build time (Makefile, SCRUB_TABLES)
make -s build/gen/scrub_tables.c
python3 bench/scrub_corpus.py "$OUT/scrub-corpus.jsonl" "${SCRUB_EVAL_SEED:-18}"
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
gcc -std=gnu17 -O2 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -I. \
	-o "$OUT/scrub_eval" bench/scrub_eval.c scrub/scrub.c scrub/rules.c scrub/keyword.c scrub/prefilter.c build/gen/scrub_tables.c \
	common/error.c $(pkg-config --cflags --libs jansson) -lm
# the profiler's driver (docs/scrub.md, "Measured"): one rb_scrub_harvest_cb of a file
# shellcheck disable=SC2046 # pkg-config prints several words on purpose
gcc -std=gnu17 -O2 -g -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -I. \
	-o "$OUT/scrub_prof" bench/scrub_prof.c scrub/scrub.c scrub/rules.c scrub/keyword.c scrub/prefilter.c build/gen/scrub_tables.c \
	common/error.c $(pkg-config --cflags --libs jansson) -lm
# ordinary text to mix the corpus into: this repository's docs and C sources (prose, code,
# tables), plus the unit test's control files (near misses)
mkdir -p "$OUT/scrub-filler"
cat docs/*.md runtime/*/*.c cli/*.c tests/unit/fixtures/scrub/control/* >"$OUT/scrub-filler/filler.txt"
"$OUT/scrub_eval" "$OUT/scrub-corpus.jsonl" "$OUT/scrub-filler" "${SCRUB_EVAL_MB:-100}" "$OUT/scrub-mixed.txt" |
	tee "$OUT/scrub-eval.txt"
# peer on the same mixed text in the same run: grep -E with an anchor set of the common families
# (bench/scrub_patterns.txt; it finds lines, it does not redact), CPU time of the child
TIMEFORMAT='%U %S'
# (its count into a file: to /dev/null, GNU grep stops at the first match)
gcpu=$({ time LC_ALL=C grep -E -c -f bench/scrub_patterns.txt "$OUT/scrub-mixed.txt" >"$OUT/grep-count.txt"; } 2>&1 |
	awk '{print $1 + $2}')
gmb=$(($(stat -c %s "$OUT/scrub-mixed.txt") / 1000000))
gmbps=$(echo "$gmb / ($gcpu + 0.001)" | bc)
smbps=$(grep -oP '^rb_scrub_buffer, mixed text \(\d+ MB, a secret per ~4 KiB\): \K\d+' "$OUT/scrub-eval.txt")
echo "  peer, LC_ALL=C grep -E -c -f bench/scrub_patterns.txt ($(wc -l <bench/scrub_patterns.txt) anchors) on the mixed text:" \
	"$gmbps MB/s per core (CPU time); rb_scrub_buffer at $(echo "scale=2; $smbps / $gmbps" | bc) of it" |
	tee -a "$OUT/scrub-eval.txt"

# The harvest phase on that mixed text: 4 files of 50 MB (SCRUB_EVAL_HARVEST_MB each) in an
# out directory, walked, read, scrubbed and stored by rb_harvest, linked against the
# library's objects (make all builds them; the Makefile's LIB_OBJS names them, so a new
# gateway-only or serve-only object does not break this link).
make -s all >/dev/null
# (make -q's status says whether anything is out of date: not a failure here)
LIB_OBJS=$({ make -pnq all 2>/dev/null || :; } | sed -n 's/^LIB_OBJS := //p')
# shellcheck disable=SC2046,SC2086 # the objects and pkg-config's words on purpose
gcc -std=gnu17 -O2 -Wall -Wextra -Werror -Wno-unused-parameter -I. -o "$OUT/scrub_harvest" bench/scrub_harvest.c \
	$LIB_OBJS \
	-l:libarchive.so.13 -Wl,-Bstatic -lcrypto -lsqlite3 -lseccomp -lcap -lnftnl -ljansson -larchive -llzma -lbz2 -lz -Wl,-Bdynamic \
	-lmnl -l:libzstd.so.1 -l:libacl.so.1 -lmicrohttpd -lcurl -ldl -lpthread -lm
HW=$(mktemp -d /tmp/scrub-harvest.XXXXXX)
"$OUT/scrub_harvest" "$OUT/scrub-mixed.txt" "$HW" 4 "${SCRUB_EVAL_HARVEST_MB:-50}" | tee -a "$OUT/scrub-eval.txt"
rm -rf "$HW"

# The same records through secretlint and its recommended preset, pinned, installed here
# (SCRUB_EVAL_SECRETLINT=0 skips it). Its figure is records with a finding: it does not redact.
if [ "${SCRUB_EVAL_SECRETLINT:-1}" != 0 ]; then
	SL="$OUT/secretlint"
	if [ ! -x "$SL/node_modules/.bin/secretlint" ]; then
		mkdir -p "$SL"
		npm install --prefix "$SL" --no-audit --no-fund --silent \
			secretlint@13.0.6 @secretlint/secretlint-rule-preset-recommend@13.0.6
	fi
	printf '{"rules":[{"id":"@secretlint/secretlint-rule-preset-recommend"}]}\n' >"$SL/.secretlintrc.json"
	# outside the work tree: secretlint skips what .gitignore names (build/)
	REC=$(mktemp -d /tmp/scrub-records.XXXXXX)
	trap 'rm -rf "$REC"' EXIT
	python3 bench/scrub_secretlint.py split "$OUT/scrub-corpus.jsonl" "$REC"
	start=$(date +%s.%N)
	"$SL/node_modules/.bin/secretlint" --format json --secretlintrc "$SL/.secretlintrc.json" \
		"$REC/*.txt" >"$OUT/secretlint.json" || true # exit 1: it found some
	end=$(date +%s.%N)
	python3 bench/scrub_secretlint.py report "$OUT/scrub-corpus.jsonl" "$REC" "$OUT/secretlint.json" |
		tee -a "$OUT/scrub-eval.txt"
	echo "secretlint: $(cat "$REC"/*.txt | wc -c) bytes in $(echo "$end - $start" | bc) s (node start-up included)" |
		tee -a "$OUT/scrub-eval.txt"
fi
