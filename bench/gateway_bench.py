#!/usr/bin/env python3
# `make bench-gateway`: runbox-gateway on host loopback (no sandbox: the listener is made here and
# passed as the runner passes it), against the same upstreams called directly, in one run:
#   connector: the added latency (p50, p99) of GET /v1/connectors/bench/x over a direct GET of
#              the same loopback upstream, and calls per second by wrk (Debian's; 2 threads,
#              16 keep-alive connections);
#   proxied:   the same GET through tinyproxy (Debian's) as a forward proxy: a peer's added
#              latency and calls/s, and runbox's ratio to it;
#   CONNECT:   a tunnel's setup plus one echoed line, through runbox-gateway and through
#              tinyproxy, p50 and p99.
# It also counts the upstream connections each path opened (the gateway reuses its own).
# The HTTP upstream is C (bench/gateway_upstream.c), the latency client Python (its cost is in
# both rows, so the difference is the gateway's); the direct row's calls/s is the ceiling of
# that upstream and client on this host. Without wrk, calls/s falls back to Python client
# threads, which bound it, and the table says so. Prints a Markdown table.
# Usage: gateway_bench.py GATEWAY UPSTREAM [N]
import base64, hashlib, hmac, http.client, json, os, secrets, shutil, socket
import socketserver, subprocess, sys, tempfile, threading, time

GW, UPSTREAM = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
THREADS = 4
WRK = shutil.which("wrk")
WRK_ARGS = ["-t2", "-c16", "-d4s"]


class Upstream:
    """bench/gateway_upstream.c: the C upstream; it prints its port, then the connections it
    accepted so far for each line it reads."""

    def __init__(self, path):
        self.p = subprocess.Popen([path, "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.port = int(self.p.stdout.readline())

    @property
    def conns(self):
        self.p.stdin.write("\n")
        self.p.stdin.flush()
        return int(self.p.stdout.readline())

    def stop(self):
        self.p.stdin.close()
        self.p.wait()


class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        b = self.request.recv(4096)
        self.request.sendall(b)


class TS(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(h):
    s = TS(("127.0.0.1", 0), h)
    s.daemon_threads = True
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def token(key, run):
    p = json.dumps({"agent": "bench", "exp": int(time.time()) + 3600, "nonce": secrets.token_hex(16), "run": run,
                    "tenant": "bench"}, separators=(",", ":"), sort_keys=True).encode()
    signed = "rbx1." + b64u(p)
    return signed + "." + b64u(hmac.new(key, signed.encode(), hashlib.sha256).digest())


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def latencies(port, path, headers, n):
    c = http.client.HTTPConnection("127.0.0.1", port)  # reopened by http.client after a close
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", path, headers=headers)
        r = c.getresponse()
        r.read()
        if headers.get("Connection") == "close":
            c.close()  # the next request opens a new one
        out.append((time.perf_counter() - t) * 1e3)
        assert r.status == 200, r.status
    c.close()
    return out


def rate(port, path, headers, n):
    done = []

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", port)
        for _ in range(n):
            c.request("GET", path, headers=headers)
            c.getresponse().read()
            if headers.get("Connection") == "close":
                c.close()
        done.append(n)

    ts = [threading.Thread(target=worker) for _ in range(THREADS)]
    t = time.perf_counter()
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    return sum(done) / (time.perf_counter() - t)


def wrk(port, path, headers):
    """Calls per second by wrk (C, 2 threads, 16 keep-alive connections), or None without it.
    An absolute URL as path (a forward proxy's request) goes through a script."""
    if not WRK:
        return None
    args = [WRK] + WRK_ARGS
    for k, v in headers.items():
        args += ["-H", "%s: %s" % (k, v)]
    script = None
    if path.startswith("http://"):
        script = os.path.join(tmp, "path.lua")
        open(script, "w").write('wrk.path = "%s"\n' % path)
        args += ["-s", script]
        path = "/"
    out = subprocess.run(args + ["http://127.0.0.1:%d%s" % (port, path)], capture_output=True, text=True,
                         check=True).stdout
    # A server that closes after each response (Connection: close) shows as read errors: wrk
    # counts the response, then reconnects.
    closes = headers.get("Connection") == "close"
    bad = [l for l in out.splitlines() if "Non-2xx" in l or ("Socket errors" in l and not closes)]
    assert not bad, "wrk: %s" % bad
    return float(next(l for l in out.splitlines() if l.startswith("Requests/sec:")).split()[1])


def connects(port, target, auth, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (target, target, auth)).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
        assert b" 200 " in got.split(b"\r\n")[0], got[:80]
        s.sendall(b"ping\n")
        got = b""
        while not got.endswith(b"ping\n"):
            b = s.recv(4096)
            if not b:
                break
            got += b
        s.close()
        out.append((time.perf_counter() - t) * 1e3)
    return out


UP = Upstream(UPSTREAM)
up, echo = UP.port, serve(Echo)
tmp = tempfile.mkdtemp(prefix="rbx-gwbench.")
conf = os.path.join(tmp, "gateway.json")
json.dump({"connectors": {"bench": {"url": "http://127.0.0.1:%d" % up, "credential": {"env": "RBX_BENCH_KEY"},
                                    "inject": "bearer", "routes": [{"methods": ["GET"], "paths": ["/*"]}]}},
           "private_upstreams": ["127.0.0.1"]}, open(conf, "w"))
lsock = socket.socket()
lsock.bind(("127.0.0.1", 0))
lsock.listen(128)
gport = lsock.getsockname()[1]
key, run = secrets.token_bytes(32), "bench-run"
cfg_r, cfg_w = os.pipe()
rdy_r, rdy_w = os.pipe()
os.write(cfg_w, json.dumps({"run_id": run, "parent_pid": os.getpid(), "key": key.hex(), "listen_fds": [4], "ready_fd": 5, "gateway_config": conf,
                            "connectors": ["bench"], "proxy": ["localhost:%d" % echo],
                            "rate": 10 ** 6, "burst": 10 ** 6}).encode())
os.close(cfg_w)


def fds():  # the runner's layout: 3 the config, 4 the listener, 5 the readiness pipe
    hi = [os.dup2(f, 100 + i) for i, f in enumerate((cfg_r, lsock.fileno(), rdy_w))]
    for i, f in enumerate(hi):
        os.dup2(f, 3 + i)


env = dict(os.environ, RBX_BENCH_KEY="rbxbenchcredential0123")
gw = subprocess.Popen([GW], preexec_fn=fds, pass_fds=(3, 4, 5), env=env,
                      stdout=subprocess.DEVNULL)
os.close(rdy_w)
assert os.read(rdy_r, 1) == b"R", "runbox-gateway did not say it was ready"
tp = shutil.which("tinyproxy") or (os.path.exists("/usr/bin/tinyproxy") and "/usr/bin/tinyproxy")
tpp = None
if tp:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    tport = s.getsockname()[1]
    s.close()
    tconf = os.path.join(tmp, "tinyproxy.conf")
    open(tconf, "w").write("Port %d\nListen 127.0.0.1\nTimeout 60\nMaxClients 100\nAllow 127.0.0.1\n"
                           "ConnectPort %d\nLogLevel Critical\n" % (tport, echo))
    tpp = subprocess.Popen([tp, "-d", "-c", tconf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", tport)).close()
            break
        except OSError:
            time.sleep(0.05)
tok = token(key, run)
H = {"Authorization": "Bearer " + tok}
WARM = 200
latencies(up, "/x", {}, WARM)
c0 = UP.conns
latencies(gport, "/v1/connectors/bench/x", H, WARM)
d = latencies(up, "/x", {}, N)
g = latencies(gport, "/v1/connectors/bench/x", H, N)
gconns = UP.conns - c0 - 1  # the direct calls' one connection


def calls(port, path, headers):
    r = wrk(port, path, headers)
    return r if r is not None else rate(port, path, headers, N // THREADS)


rd = calls(up, "/x", {})
rg = calls(gport, "/v1/connectors/bench/x", H)
auth = "Proxy-Authorization: Basic %s\r\n" % base64.b64encode(("runbox:" + tok).encode()).decode()
cg = connects(gport, "localhost:%d" % echo, auth, N // 4)
rows = [("direct GET (the upstream itself)", d, rd), ("connector GET through runbox-gateway", g, rg)]
ct = None
if tpp:
    purl = "http://127.0.0.1:%d/x" % up
    TH = {"Connection": "close"}  # tinyproxy serves one request per client connection
    c0 = UP.conns
    latencies(tport, purl, TH, WARM)
    t = latencies(tport, purl, TH, N)
    tconns = UP.conns - c0
    rows.append(("GET through tinyproxy (forward proxy)", t, calls(tport, purl, TH)))
    ct = connects(tport, "127.0.0.1:%d" % echo, "", N // 4)
    tpp.terminate()
gw.terminate()
gw.wait()
UP.stop()
shutil.rmtree(tmp)
client = "wrk %s" % " ".join(WRK_ARGS) if WRK else "%d Python client threads: wrk is not installed" % THREADS
print("| path | p50 ms | p99 ms | added p50 ms | added p99 ms | calls/s (%s) |" % client)
print("| --- | --- | --- | --- | --- | --- |")
for name, xs, r in rows:
    print("| %s | %.3f | %.3f | %s | %s | %.0f |" % (name, pct(xs, .5), pct(xs, .99),
          "%.3f" % (pct(xs, .5) - pct(d, .5)) if xs is not d else "", "%.3f" % (pct(xs, .99) - pct(d, .99)) if xs is not d else "", r))
print("| CONNECT + one echoed line, runbox-gateway | %.3f | %.3f | | | |" % (pct(cg, .5), pct(cg, .99)))
if ct:
    print("| CONNECT + one echoed line, tinyproxy | %.3f | %.3f | | | |" % (pct(ct, .5), pct(ct, .99)))
print("\nupstream connections opened for %d sequential calls: runbox-gateway %d%s" %
      (WARM + N, gconns, ", tinyproxy %d" % tconns if tpp else ""))
if tpp:
    added = lambda xs, p: pct(xs, p) - pct(d, p)
    print("GET added latency ratio runbox/tinyproxy: p50 %.2f, p99 %.2f; calls/s ratio %.2f" %
          (added(g, .5) / added(t, .5), added(g, .99) / added(t, .99), rows[1][2] / rows[2][2]))
    print("CONNECT p50 ratio runbox/tinyproxy: %.2f, p99: %.2f" % (pct(cg, .5) / pct(ct, .5), pct(cg, .99) / pct(ct, .99)))
else:
    print("tinyproxy is not installed: no comparison with it")
