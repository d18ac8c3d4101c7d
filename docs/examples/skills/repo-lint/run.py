#!/usr/bin/env python3
"""repo-lint's entry: a few pyflakes/pycodestyle checks over a repository's Python files with the
standard library's ast; the findings as one JSON object, on stdout and in the out file."""
import ast
import json
import os
import sys

MAX_LINE = 100
SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__"}


def fail(msg, code=1):
    print("repo-lint: " + msg, file=sys.stderr)
    sys.exit(code)


class Checker(ast.NodeVisitor):
    def __init__(self, add):
        self.add = add
        self.imported = {}  # name -> (node, shown)
        self.used = set()
        self.exported = set()

    def visit_Import(self, node):
        for a in node.names:
            name = a.asname or a.name.split(".")[0]
            self.imported.setdefault(name, (node, a.name))
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        for a in node.names:
            if a.name != "*" and node.module != "__future__":
                self.imported.setdefault(a.asname or a.name, (node, a.name))
        self.generic_visit(node)

    def visit_Name(self, node):
        self.used.add(node.id)
        self.generic_visit(node)

    def visit_Attribute(self, node):
        base = node
        while isinstance(base, ast.Attribute):
            base = base.value
        if isinstance(base, ast.Name):
            self.used.add(base.id)
        self.generic_visit(node)

    def visit_Assign(self, node):
        for t in node.targets:
            if isinstance(t, ast.Name) and t.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                for e in node.value.elts:
                    if isinstance(e, ast.Constant) and isinstance(e.value, str):
                        self.exported.add(e.value)
        self.generic_visit(node)

    def visit_Compare(self, node):
        for op, right in zip(node.ops, node.comparators):
            if isinstance(op, (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant) and right.value is None:
                self.add(node, "E711", "comparison to None (use `is None` or `is not None`)")
        self.generic_visit(node)

    def visit_ExceptHandler(self, node):
        if node.type is None:
            self.add(node, "E722", "bare `except:`")
        self.generic_visit(node)

    def _defaults(self, node):
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            mutable = isinstance(d, (ast.List, ast.Dict, ast.Set)) or (
                isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id in ("list", "dict", "set")
            )
            if mutable:
                self.add(d, "B006", "mutable default argument in `%s`" % node.name)

    def visit_FunctionDef(self, node):
        self._defaults(node)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef


def lint_file(path, rel, findings):
    def add(node_or_line, code, message, col=None):
        if isinstance(node_or_line, int):
            line, c = node_or_line, col or 1
        else:
            line, c = node_or_line.lineno, node_or_line.col_offset + 1
        findings.append({"path": rel, "line": line, "col": c, "code": code, "message": message})

    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        add(1, "E999", "unreadable: %s" % e.strerror)
        return
    try:
        tree = ast.parse(source, filename=rel)
    except (SyntaxError, ValueError) as e:
        add(getattr(e, "lineno", None) or 1, "E999", "syntax error: %s" % getattr(e, "msg", str(e)),
            col=getattr(e, "offset", None) or 1)
        return
    text = source.decode("utf-8", "replace")
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > MAX_LINE:
            add(n, "E501", "line too long (%d > %d characters)" % (len(line), MAX_LINE), col=MAX_LINE + 1)
        if line != line.rstrip(" \t"):
            add(n, "W291", "trailing whitespace", col=len(line.rstrip(" \t")) + 1)
    c = Checker(add)
    c.visit(tree)
    if os.path.basename(rel) != "__init__.py":
        for name, (node, shown) in c.imported.items():
            if name not in c.used and name not in c.exported:
                add(node, "F401", "`%s` imported but unused" % shown)


def main():
    repo = os.environ.get("RUNBOX_INPUT_REPO") or fail("the repo input is missing", 2)
    out = os.environ.get("RUNBOX_INPUT_OUT") or fail("the out input is missing", 2)
    if not (out.startswith("/workspace/out/") and out.endswith(".json")):
        fail("out must be a .json under /workspace/out, got '%s'" % out, 2)
    if not os.path.isdir(repo):
        fail("no such folder: %s" % repo)
    findings, files = [], 0
    for root, dirs, names in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            if name.endswith(".py"):
                files += 1
                path = os.path.join(root, name)
                lint_file(path, os.path.relpath(path, repo), findings)
    findings.sort(key=lambda f: (f["path"], f["line"], f["col"], f["code"]))
    counts = {}
    for f in findings:
        counts[f["code"]] = counts.get(f["code"], 0) + 1
    report = {"tool": "repo-lint", "version": 1, "repo": repo, "files": files, "findings": findings,
              "counts": dict(sorted(counts.items()))}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
