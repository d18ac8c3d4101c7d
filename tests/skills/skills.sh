#!/usr/bin/env bash
# The seed's three jobs as shipped skills (docs/examples/skills): a markdown report rendered to
# PDF, a .docx template filled from JSON values, a Python repository linted with findings as
# JSON, run by one manifest on the agent image; the artifacts are checked with pdftotext, by
# reading the .docx's document.xml, and against the findings' schema. docx-fill and repo-lint
# need only python3 and run on `host` as well. The agent image comes from RBX_AGENT_STATE (a
# state directory holding it as `agent`; `make test-skills` builds it there when missing),
# imported into this test's store.
# modes: root
. "$(dirname "$0")/../lib.sh"
lib_init skills

SKILLS=$ROOT/docs/examples/skills
IN=$T/in
mkdir -p "$IN/repo/pkg" && chmod -R a+rX "$IN"

# ---- the fixtures ---------------------------------------------------------------------------
cat >"$IN/report.md" <<'MD'
This week the team **shipped** the importer and fixed zebra-budget-7.

## Next week

- finish the agent image
- write the *skills* guide
MD
# A template whose {{client}} placeholder Word split over three runs (the skill joins them), and
# a {{total}} in one run.
"$PY" - "$IN/template.docx" <<'PY'
import sys, zipfile
W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
doc = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
       '<w:document ' + W + '><w:body>'
       '<w:p><w:r><w:t>Dear </w:t></w:r><w:r><w:t>{{cli</w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>ent}}</w:t></w:r>'
       '<w:r><w:t>,</w:t></w:r></w:p>'
       '<w:p><w:r><w:t xml:space="preserve">Your total is {{total}} EUR.</w:t></w:r></w:p>'
       '</w:body></w:document>')
ct = ('<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
      '<Default Extension="xml" ContentType="application/xml"/>'
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
rels = ('<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>')
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("[Content_Types].xml", ct)
    z.writestr("_rels/.rels", rels)
    z.writestr("word/document.xml", doc)
PY
echo '{"client": "ACME & Sons", "total": 1200, "unused_key": "x"}' >"$IN/values.json"
echo '{"total": 1200}' >"$IN/values-short.json"
# A small repository with one finding of each kind, and a clean file (the control: no finding).
cat >"$IN/repo/pkg/util.py" <<'PY'
import os
import json


def load(path, cache={}):
    try:
        return json.load(open(path))
    except:
        return None


def check(x):
    if x == None:  
        return "none"
    return "this line is long enough to go past the limit of one hundred characters, which it does, by far"
PY
printf 'def broken(:\n    pass\n' >"$IN/repo/pkg/broken.py"
cat >"$IN/repo/clean.py" <<'PY'
import sys


def main():
    return len(sys.argv)
PY
: >"$IN/repo/pkg/__init__.py"
chmod -R a+rX "$IN"

manifest() { # FILE IMAGE STEPS-JSON SKILLS-JSON
	cat >"$1" <<JSON
{"tenant": "local", "agent": "seed-jobs", "image": "$2", "policy": "default",
 "inputs": [{"from": "$IN/report.md", "to": "/workspace/in/report.md"},
            {"from": "$IN/template.docx", "to": "/workspace/in/template.docx"},
            {"from": "$IN/values.json", "to": "/workspace/in/values.json"},
            {"from": "$IN/values-short.json", "to": "/workspace/in/values-short.json"},
            {"from": "$IN/repo", "to": "/workspace/in/repo"}],
 "skills": $4,
 "limits": {"timeout": "600s", "memory": "1G"},
 "steps": $3}
JSON
}
FILL='{"name": "fill", "skill": "docx-fill", "inputs": {"template": "/workspace/in/template.docx", "values": "/workspace/in/values.json", "out": "/workspace/out/letter.docx"}}'
LINT='{"name": "lint", "skill": "repo-lint", "inputs": {"repo": "/workspace/in/repo", "out": "/workspace/out/findings.json"}}'
REPORT='{"name": "report", "skill": "weekly-report", "inputs": {"markdown": "/workspace/in/report.md", "title": "Weekly report 49", "out": "/workspace/out/report.pdf"}}'

# The filled .docx: its document.xml has the values (escaped) and no placeholder left; the
# template's has them (the control).
check_docx() { # LABEL FILE
	local xml tmpl
	xml=$(unzip -p "$2" word/document.xml 2>/dev/null)
	tmpl=$(unzip -p "$IN/template.docx" word/document.xml)
	if grep -q 'Dear ACME &amp; Sons' <<<"$xml" && grep -q 'Your total is 1200 EUR.' <<<"$xml" &&
		! grep -q '{{' <<<"$xml" && grep -q '{{total}}' <<<"$tmpl"; then
		ok "$1: docx-fill: document.xml holds the values, XML-escaped, and no placeholder"
	else not_ok "$1: docx-fill: document.xml holds the values, XML-escaped, and no placeholder" "$(head -c 300 <<<"$xml")"; fi
}
# The findings: the schema, one finding of each kind where the fixture has it, none in the
# clean file or the package's empty __init__.py.
check_findings() { # LABEL FILE
	if "$PY" - "$2" <<'PY'; then ok "$1: repo-lint: the findings match their schema and the fixture's problems"
import json, sys
r = json.load(open(sys.argv[1]))
assert set(r) == {"tool", "version", "repo", "files", "findings", "counts"}, r.keys()
assert r["tool"] == "repo-lint" and r["version"] == 1 and r["files"] == 4, r
for f in r["findings"]:
    assert set(f) == {"path", "line", "col", "code", "message"}, f
    assert isinstance(f["path"], str) and isinstance(f["line"], int) and f["line"] >= 1
    assert isinstance(f["col"], int) and f["col"] >= 1 and isinstance(f["message"], str)
got = {(f["path"], f["line"], f["code"]) for f in r["findings"]}
want = {("pkg/util.py", 1, "F401"), ("pkg/util.py", 5, "B006"), ("pkg/util.py", 8, "E722"),
        ("pkg/util.py", 13, "E711"), ("pkg/util.py", 13, "W291"), ("pkg/util.py", 15, "E501"),
        ("pkg/broken.py", 1, "E999")}
assert got == want, (sorted(got - want), sorted(want - got))
assert not any(f["path"] in ("clean.py", "pkg/__init__.py") for f in r["findings"])
assert sum(r["counts"].values()) == len(r["findings"]) == 7, r["counts"]
assert r["findings"] == sorted(r["findings"], key=lambda f: (f["path"], f["line"], f["col"], f["code"]))
PY
	else not_ok "$1: repo-lint: the findings match their schema and the fixture's problems" "$(head -c 400 "$2" 2>&1)"; fi
}

# ---- on host: the two python3-only skills ---------------------------------------------------
manifest "$T/host.json" host "[$FILL, $LINT]" "[\"$SKILLS/docx-fill\", \"$SKILLS/repo-lint\"]"
run_rbx run "$T/host.json" --json --output "$T/host-out"
if [ "$RC" = 0 ] && [ -f "$T/host-out/letter.docx" ] && [ -f "$T/host-out/findings.json" ]; then
	ok "host: docx-fill and repo-lint run and their files are artifacts"
else not_ok "host: docx-fill and repo-lint run and their files are artifacts" "exit $RC: $(first_line "$ERR")"; fi
check_docx host "$T/host-out/letter.docx"
check_findings host "$T/host-out/findings.json"
# A placeholder without a value fails the skill, naming it, and writes no document.
SHORT=${FILL/values.json/values-short.json}
manifest "$T/short.json" host "[${SHORT/letter.docx/short.docx}]" "[\"$SKILLS/docx-fill\"]"
run_rbx run "$T/short.json" --json --output "$T/short-out"
if [ "$RC" != 0 ] && grep -q "no value for placeholder(s): client" "$T/out" "$T/err" && [ ! -e "$T/short-out/short.docx" ]; then
	ok "host: docx-fill fails naming a placeholder that has no value, and writes nothing"
else not_ok "host: docx-fill fails naming a placeholder that has no value, and writes nothing" "exit $RC: $(first_line "$ERR")"; fi

# ---- on the agent image: all three, recorded with the image's digest ---------------------------
agent_root=
if [ -n "${RBX_AGENT_STATE:-}" ]; then
	agent_root=$(env RUNBOX_STATE_DIR="$RBX_AGENT_STATE" "$RUNBOX" image inspect agent 2>/dev/null |
		"$PY" -c 'import json,sys; print(json.load(sys.stdin)["rootfs"])' 2>/dev/null)
fi
if [ -z "$agent_root" ] || [ ! -d "$agent_root" ]; then
	not_ok "agent: the agent image is there" "no image \`agent\` in RBX_AGENT_STATE='${RBX_AGENT_STATE:-}' (\`make test-skills\` builds it)"
	exit 0
fi
policy_variant default "$T/imp.json" imp "p['images'] = {'allow': ['$(dirname "$agent_root")']}"
start=$(date +%s)
run_rbx image import "$agent_root" --name agent --policy "$T/imp.json"
agent_digest=$OUT
echo "# importing the agent image took $(($(date +%s) - start)) s" >&2
if [ "$RC" = 0 ] && [[ $agent_digest == sha256:* ]]; then ok "agent: the agent image is imported into the test's store"
else not_ok "agent: the agent image is imported into the test's store" "exit $RC: $(first_line "$ERR")"; exit 0; fi

manifest "$T/agent.json" agent "[$REPORT, $FILL, $LINT]" \
	"[\"$SKILLS/weekly-report\", \"$SKILLS/docx-fill\", \"$SKILLS/repo-lint\"]"
start=$(date +%s)
run_rbx run "$T/agent.json" --json --output "$T/agent-out"
echo "# the three skills on the agent image took $(($(date +%s) - start)) s" >&2
cp "$T/out" "$T/agent-result.json"
if [ "$RC" = 0 ] && [ "$(json "$T/agent-result.json" image.digest)" = "$agent_digest" ]; then
	ok "agent: the manifest runs the three skills, recorded with the agent image's digest"
else not_ok "agent: the manifest runs the three skills, recorded with the agent image's digest" "exit $RC: $(first_line "$ERR") $(json "$T/agent-result.json" image.digest)"; fi
run_id=$(json "$T/agent-result.json" run_id)
run_rbx ledger query --run "$run_id" --type run_start --json
if grep -q "$agent_digest" <<<"$OUT"; then ok "agent: the ledger's run_start names the image's digest"
else not_ok "agent: the ledger's run_start names the image's digest" "$(first_line "$OUT$ERR")"; fi
run_rbx artifact ls "$run_id" --json
if grep -q report.pdf <<<"$OUT" && grep -q letter.docx <<<"$OUT" && grep -q findings.json <<<"$OUT"; then
	ok "agent: the PDF, the .docx and the findings are the run's artifacts"
else not_ok "agent: the PDF, the .docx and the findings are the run's artifacts" "$(first_line "$OUT$ERR")"; fi
# The PDF's text, by pdftotext (the agent image's; the host has none): the title, the body
# rendered (no markdown markup left), the list.
chmod -R a+rX "$T/agent-out" 2>/dev/null
run_rbx run --image agent --input "$T/agent-out/report.pdf" -- pdftotext /workspace/in/report.pdf -
pdf_text=$OUT
if [ "$RC" = 0 ] && grep -q "Weekly report 49" <<<"$pdf_text" && grep -q "team shipped the importer" <<<"$pdf_text" &&
	grep -q "zebra-budget-7" <<<"$pdf_text" && grep -q "write the skills guide" <<<"$pdf_text" && ! grep -q '\*\*' <<<"$pdf_text" &&
	[ "$(head -c 5 "$T/agent-out/report.pdf")" = "%PDF-" ]; then
	ok "agent: weekly-report: pdftotext reads the title and the rendered markdown"
else not_ok "agent: weekly-report: pdftotext reads the title and the rendered markdown" "exit $RC: $(head -c 300 <<<"$pdf_text") $(first_line "$ERR")"; fi
check_docx agent "$T/agent-out/letter.docx"
check_findings agent "$T/agent-out/findings.json"
