#!/bin/sh
# word-count's entry point: reads its inputs from RUNBOX_INPUT_* (they are also, all together,
# in $RUNBOX_INPUTS_FILE), prints one JSON object on stdout and nothing else there. POSIX sh
# and busybox applets only, so it runs in the `minimal` image (no jq, no python).
set -eu

file=${RUNBOX_INPUT_FILE:?the input file is missing}
label=${RUNBOX_INPUT_LABEL-}
top=${RUNBOX_INPUT_TOP:-5}

case $top in
'' | *[!0-9]*)
	echo "word-count: top must be a whole number, got '$top'" >&2
	exit 2
	;;
esac
[ -f "$file" ] || {
	echo "word-count: no such file: $file" >&2
	exit 1
}

# A JSON string's body without jq: drop control characters, escape backslash and quote.
json_str() {
	printf '%s' "$1" | tr -d '\000-\037' | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g'
}

lines=$(wc -l <"$file" | tr -d ' ')
words=$(wc -w <"$file" | tr -d ' ')
bytes=$(wc -c <"$file" | tr -d ' ')

printf '{"label":"%s","file":"%s","lines":%s,"words":%s,"bytes":%s,"top":[' \
	"$(json_str "$label")" "$(json_str "$file")" "$lines" "$words" "$bytes"
# Only [a-z0-9] survive the tr calls, so the words need no escaping.
tr -cs 'A-Za-z0-9' '\n' <"$file" | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c |
	sort -k1,1nr -k2,2 | head -n "$top" | {
	sep=
	while read -r n w; do
		printf '%s{"word":"%s","count":%s}' "$sep" "$w" "$n"
		sep=,
	done
}
printf ']}\n'
