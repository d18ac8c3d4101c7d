#!/bin/sh
# weekly-report's entry: markdown -> .odt (pandoc) -> PDF (soffice --headless), in a scratch
# directory under /tmp; one JSON object on stdout, every tool's own output on stderr.
set -eu

md=${RUNBOX_INPUT_MARKDOWN:?the markdown input is missing}
title=${RUNBOX_INPUT_TITLE:?the title input is missing}
out=${RUNBOX_INPUT_OUT:?the out input is missing}

case $out in
/workspace/out/*.pdf) ;;
*)
	echo "weekly-report: out must be a .pdf under /workspace/out, got '$out'" >&2
	exit 2
	;;
esac
[ -f "$md" ] || {
	echo "weekly-report: no such file: $md" >&2
	exit 1
}
for tool in pandoc soffice pdfinfo python3; do
	command -v "$tool" >/dev/null || {
		echo "weekly-report: $tool is not in this image (run it on the agent image)" >&2
		exit 1
	}
done

work=$(mktemp -d /tmp/weekly-report.XXXXXX)
trap 'rm -rf "$work"' EXIT
# LibreOffice keeps a profile; a fresh one in the scratch directory, never $HOME's.
export HOME=$work
{ printf '# %s\n\n' "$title"; cat "$md"; } >"$work/report.md"
pandoc --from=markdown --to=odt -o "$work/report.odt" "$work/report.md" >&2
soffice --headless --norestore "-env:UserInstallation=file://$work/profile" \
	--convert-to pdf --outdir "$work" "$work/report.odt" >&2
[ -s "$work/report.pdf" ] || {
	echo "weekly-report: LibreOffice wrote no PDF" >&2
	exit 1
}
mkdir -p "$(dirname "$out")"
cp "$work/report.pdf" "$out"
pages=$(pdfinfo "$out" | sed -n 's/^Pages: *//p')
python3 - "$out" "$pages" "$title" <<'PY'
import json, os, sys
out, pages, title = sys.argv[1], sys.argv[2], sys.argv[3]
print(json.dumps({"pdf": out, "bytes": os.path.getsize(out), "pages": int(pages or 0), "title": title}))
PY
