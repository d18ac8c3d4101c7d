#!/usr/bin/env python3
"""docx-fill's entry: {{name}} placeholders of a .docx's document, header and footer parts
replaced by a JSON object's values; one JSON object on stdout. Standard library only."""
import json
import os
import re
import sys
import zipfile
from xml.sax.saxutils import escape

PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")
PARAGRAPH = re.compile(r"<w:p[ >].*?</w:p>", re.S)
TEXT = re.compile(r"(<w:t(?: [^>]*)?>)(.*?)(</w:t>)", re.S)
PARTS = re.compile(r"word/(document|header\d*|footer\d*)\.xml$")


def fail(msg, code=1):
    print("docx-fill: " + msg, file=sys.stderr)
    sys.exit(code)


def fill_paragraph(p, values, used, missing):
    texts = TEXT.findall(p)
    joined = "".join(t[1] for t in texts)
    if "{{" not in joined:
        return p
    names = PLACEHOLDER.findall(joined)
    for n in names:
        (used if n in values else missing).add(n)
    filled = PLACEHOLDER.sub(lambda m: escape(values.get(m.group(1), m.group(0))), joined)
    # The paragraph's text goes into its first run; the others are emptied (a placeholder may
    # have been split over runs by Word).
    first = [True]

    def put(m):
        if first[0]:
            first[0] = False
            start = m.group(1)
            if "xml:space" not in start:
                start = start[:-1] + ' xml:space="preserve">'
            return start + filled + m.group(3)
        return m.group(1) + m.group(3)

    return TEXT.sub(put, p)


def main():
    template = os.environ.get("RUNBOX_INPUT_TEMPLATE") or fail("the template input is missing", 2)
    values_path = os.environ.get("RUNBOX_INPUT_VALUES") or fail("the values input is missing", 2)
    out = os.environ.get("RUNBOX_INPUT_OUT") or fail("the out input is missing", 2)
    if not (out.startswith("/workspace/out/") and out.endswith(".docx")):
        fail("out must be a .docx under /workspace/out, got '%s'" % out, 2)
    try:
        with open(values_path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as e:
        fail("values `%s`: %s" % (values_path, e))
    if not isinstance(raw, dict):
        fail("values `%s`: not a JSON object" % values_path)
    values = {}
    for k, v in raw.items():
        if isinstance(v, bool):
            values[k] = "true" if v else "false"
        elif isinstance(v, (str, int, float)):
            values[k] = str(v)
        else:
            fail("values `%s`: `%s` is not a string, number or boolean" % (values_path, k))
    try:
        src = zipfile.ZipFile(template)
    except (OSError, zipfile.BadZipFile) as e:
        fail("template `%s`: not a .docx (%s)" % (template, e))
    used, missing = set(), set()
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    with src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if PARTS.match(item.filename):
                xml = data.decode("utf-8")
                xml = PARAGRAPH.sub(lambda m: fill_paragraph(m.group(0), values, used, missing), xml)
                data = xml.encode("utf-8")
            dst.writestr(item, data)
    if missing:
        os.unlink(tmp)
        fail("no value for placeholder(s): " + ", ".join(sorted(missing)), 3)
    os.replace(tmp, out)
    print(json.dumps({"docx": out, "filled": sorted(used), "unused": sorted(set(values) - used)}))


if __name__ == "__main__":
    main()
