#!/usr/bin/env python3
"""Holds docs/openapi.json to runbox serve (tests/integration/serve_openapi.sh runs it).

usage: serve_openapi.py DOC HTTP_C SOCKET

1. The route literals serve/http.c compares path segments with are exactly the segments of the
   document's paths: an undocumented route fails, and so does a documented one the code lacks.
2. On a live daemon, every documented operation is routed (not a 405, not a 404 "no such
   path") and answers with a status the document lists; every other method on a documented
   path is a 405 (or "no such path"); undocumented paths are a 404 "no such path" (the control).
3. Every JSON body the document declares closed (additionalProperties: false) is closed in the
   daemon (an unknown key is a 400 naming it), and every property it documents is known to the
   daemon (a wrong value is never "unknown key").

PENDING lists what another branch adds (ports): documented
already, allowed to be missing here and held like the rest once served. Nothing else is.
"""
import http.client
import json
import re
import socket
import sys

PENDING_SEGMENTS = set()
PENDING_OPS = set()
PENDING_KEYS = set()
# A body an operation needs besides the nested object tried (its checks of the whole body
# come first): a process needs its argv, and its size a tty.
NESTED_BASE = {("post", "/v1/sessions/{id}/processes"): {"argv": ["true"], "tty": True}}
METHODS = ["get", "post", "put", "delete", "patch"]

failures = []
passes = 0


def check(cond, what, detail=""):
    global passes
    if cond:
        passes += 1
    else:
        failures.append(f"{what}: {detail}")


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("runbox", timeout=60)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def call(sock, method, path, body=None, ctype="application/json"):
    c = UnixConn(sock)
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    headers = {"Content-Type": ctype} if data is not None else {}
    c.request(method.upper(), path, body=data, headers=headers)
    r = c.getresponse()
    raw = r.read()
    c.close()
    try:
        j = json.loads(raw) if raw and r.getheader("Content-Type", "").startswith("application/json") else None
    except ValueError:
        j = None
    return r.status, j


def no_such_path(st, j):
    return st == 404 and isinstance(j, dict) and str(j.get("error", "")).startswith("no such path")


def names_unknown(err, path):
    """Whether err says path is an unknown key (either wording: "unknown key $.k", "$.k: unknown key")."""
    return "unknown key" in err and re.search(re.escape(path) + r"(?![\w.])", err) is not None


def resolve(doc, s):
    while isinstance(s, dict) and "$ref" in s:
        s = doc["components"]["schemas"][s["$ref"].split("/")[-1]]
    return s


def ref_name(s):
    return s["$ref"].split("/")[-1] if isinstance(s, dict) and "$ref" in s else None


def main():
    doc_path, http_c, sock = sys.argv[1:4]
    doc = json.load(open(doc_path))
    check(doc.get("openapi", "").startswith("3.1"), "an OpenAPI 3.1 document", doc.get("openapi"))
    paths = doc["paths"]

    # 1. The code's route literals against the document's segments.
    segs = {p for path in paths for p in path.split("/")[1:] if p and p != "v1" and not p.startswith("{")}
    code = open(http_c).read()
    lits = set(re.findall(r'strcmp\(\s*(?:seg\[\d\]|op)\s*,\s*"([a-z_]+)"\s*\)', code))
    lits |= set(re.findall(r'session_leaf\(\s*url\s*,\s*"([a-z_]+)"', code))
    check(len(lits) >= 10, "route literals found in serve/http.c", sorted(lits))
    for s in sorted(lits - segs):
        check(False, "a route of serve/http.c the document lacks", s)
    for s in sorted(segs - lits - PENDING_SEGMENTS):
        check(False, "a documented path segment serve/http.c does not route", s)

    # A session and a process to route the calls to.
    st, j = call(sock, "post", "/v1/sessions", {"image": "minimal"})
    if st != 201:
        print(f"not ok - a session to probe: {st} {j}")
        return 1
    sid = j["id"]
    st, j = call(sock, "post", f"/v1/sessions/{sid}/processes", {"argv": ["sleep", "30"]})
    pid = j.get("id", "0") if isinstance(j, dict) else "0"
    fill = {"id": sid, "pid": pid, "port": "3000", "ref": "sha256:" + "0" * 64}

    def url(path):
        return re.sub(r"\{(\w+)\}", lambda m: fill[m.group(1)], path)

    # The control: undocumented paths are "no such path" to this probe.
    for bad in ["/v1/nosuch", f"/v1/sessions/{sid}/nosuch", f"/v1/sessions/{sid}/fs/nosuch",
                f"/v1/sessions/{sid}/processes/{pid}/nosuch", "/nosuch"]:
        st, j = call(sock, "get", bad)
        check(no_such_path(st, j), f"control: GET {bad} is a 404 no such path", f"{st} {j}")

    # 2. Other methods on a documented path are refused; every documented operation is routed,
    # with a documented status.
    for p in paths:
        for m in METHODS:
            if m in paths[p]:
                continue
            st, j = call(sock, m, url(p), b"" if m in ("post", "put", "patch") else None, "application/octet-stream")
            check(st == 405 or no_such_path(st, j), f"{m.upper()} {p} (undocumented) is refused", f"{st} {j}")

    ops = [(m, p) for p in paths for m in paths[p]]
    ops.sort(key=lambda o: (o == ("delete", "/v1/sessions/{id}"), o))  # the session's delete last
    for m, p in ops:
        o = paths[p][m]
        rb = o.get("requestBody", {}).get("content", {})
        body = {} if "application/json" in rb else None
        st, j = call(sock, m, url(p) + ("?path=/workspace" if "path" in [x["name"] for x in o.get("parameters", [])] else ""), body)
        routed = st != 405 and not no_such_path(st, j)
        if (m, p) in PENDING_OPS and not routed:
            print(f"# pending (another branch): {m.upper()} {p}")
            continue
        check(routed, f"{m.upper()} {p} is routed", f"{st} {j}")
        check(str(st) in o["responses"], f"{m.upper()} {p}: status {st} is documented", f"{sorted(o['responses'])} {j}")
    # 3. Closed bodies, on a fresh session.
    st, j = call(sock, "post", "/v1/sessions", {"image": "minimal"})
    fill["id"] = j["id"]
    st, j = call(sock, "post", f"/v1/sessions/{fill['id']}/processes", {"argv": ["sleep", "30"]})
    fill["pid"] = j.get("id", "0")
    for p in paths:
        for m, o in paths[p].items():
            s = o.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if not s or (m, p) in PENDING_OPS and no_such_path(*call(sock, m, url(p), {})):
                continue
            name, s = ref_name(s), resolve(doc, s)
            check(s.get("additionalProperties") is False, f"{m.upper()} {p}: its body is documented closed")
            st, j = call(sock, m, url(p), {"rbx_unknown_key": 1})
            err = str((j or {}).get("error", ""))
            check(st == 400 and (names_unknown(err, "$.rbx_unknown_key") or (not s.get("properties") and "$" in err)),
                  f"{m.upper()} {p}: an unknown key is a 400 naming it", f"{st} {err}")
            for k, ps in s.get("properties", {}).items():
                wrong = 5 if resolve(doc, ps).get("type") == "array" else [[]]
                st, j = call(sock, m, url(p), {k: wrong})
                err = str((j or {}).get("error", ""))
                known = st == 400 and not names_unknown(err, f"$.{k}")
                if (name, k) in PENDING_KEYS and not known:
                    print(f"# pending (another branch): $.{k} of {name}")
                    continue
                check(known, f"{m.upper()} {p}: $.{k} is known to the daemon", f"{st} {err}")
                sub = resolve(doc, ps)
                if sub.get("additionalProperties") is False and sub.get("properties") and (name, k) not in PENDING_KEYS:
                    body = dict(NESTED_BASE.get((m, p), {}))
                    body[k] = {"rbx_unknown_key": 1}
                    st, j = call(sock, m, url(p), body)
                    err = str((j or {}).get("error", ""))
                    check(st == 400 and names_unknown(err, f"$.{k}.rbx_unknown_key"), f"{m.upper()} {p}: $.{k} is closed", f"{st} {err}")
    # Durations are whole seconds from 0: a negative or fractional one is a 400 naming it.
    for v in (-1, 1.5, 2 ** 40):
        st, j = call(sock, "post", "/v1/sessions", {"image": "minimal", "idle_timeout": v})
        check(st == 400 and "$.idle_timeout" in str((j or {}).get("error")), f"idle_timeout {v} is a 400 naming it", f"{st} {j}")
        st, j = call(sock, "post", f"/v1/sessions/{fill['id']}/processes", {"argv": ["true"], "timeout": v})
        check(st == 400 and "$.timeout" in str((j or {}).get("error")), f"a process's timeout {v} is a 400 naming it", f"{st} {j}")
    call(sock, "delete", f"/v1/sessions/{fill['id']}")

    for f in failures:
        print("not ok - " + f)
    print(f"# {passes} checks passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
