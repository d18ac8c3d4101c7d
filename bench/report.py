#!/usr/bin/env python3
"""Turns bench/run.sh's hyperfine exports into the bench table and build/bench/results.json.

Usage: report.py OUTDIR MODE...  Reads OUTDIR/MODE.json (hyperfine), MODE.commands.tsv,
MODE.skipped.tsv and MODE.rss.json. Ratios are peer / runbox: above 1 means runbox is faster.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

REF = "runbox"


def quantile(times, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(times)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def read_tsv(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def version(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5)
        return (out.stdout or out.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def load_mode(outdir, mode):
    commands = dict(read_tsv(os.path.join(outdir, f"{mode}.commands.tsv")))
    rows = []
    path = os.path.join(outdir, f"{mode}.json")
    if os.path.exists(path):
        with open(path) as f:
            for r in json.load(f)["results"]:
                t = [x * 1000 for x in r["times"]]
                rows.append({
                    "name": r["command"],
                    "command": commands.get(r["command"], r["command"]),
                    "runs": len(t),
                    "median_ms": statistics.median(t),
                    "p95_ms": quantile(t, 0.95),
                    "mean_ms": statistics.fmean(t),
                    "stddev_ms": statistics.stdev(t) if len(t) > 1 else 0.0,
                    "min_ms": min(t),
                    "max_ms": max(t),
                    # CPU time (user + system, mean per run, children included) shifts less
                    # than wall time when other work shares the host.
                    "cpu_ms": (r.get("user", 0) + r.get("system", 0)) * 1000,
                })
    ref = next((r for r in rows if r["name"] == REF), None)
    for r in rows:
        r["ratio_median"] = r["median_ms"] / ref["median_ms"] if ref else None
        r["ratio_p95"] = r["p95_ms"] / ref["p95_ms"] if ref else None
    skipped = [{"name": n, "command": c, "reason": why}
               for n, c, why in read_tsv(os.path.join(outdir, f"{mode}.skipped.tsv"))]
    rss = {}
    rss_path = os.path.join(outdir, f"{mode}.rss.json")
    if os.path.exists(rss_path):
        with open(rss_path) as f:
            rss = json.load(f)
    load = []
    load_path = os.path.join(outdir, f"{mode}.load")
    if os.path.exists(load_path):
        with open(load_path) as f:
            load = [float(x) for x in f.read().split()]
    return {"commands": rows, "not_run": skipped, "memory": rss, "loadavg_before_after": load}


def fmt(v, spec=".2f", none="—"):
    return none if v is None else format(v, spec)


def mib(kb):
    return None if kb is None else kb / 1024


def print_mode(mode, m):
    load = m["loadavg_before_after"]
    load = f"; 1-min load {' -> '.join(map(str, load))} on {os.cpu_count()} cpus" if load else ""
    print(f"\n{mode}: median and p95 of each command; ratio = peer / {REF} (> 1: {REF} faster);\n"
          f"cpu = user + system per run, mean{load}")
    head = (f"{'command':<24} {'median ms':>9} {'p95 ms':>8} {'mean ms':>8} {'cpu ms':>7} "
            f"{'ratio med':>9} {'ratio p95':>9}")
    print(head)
    print("-" * len(head))
    for r in m["commands"]:
        print(f"{r['name']:<24} {r['median_ms']:>9.2f} {r['p95_ms']:>8.2f} {r['mean_ms']:>8.2f} {r['cpu_ms']:>7.2f} "
              f"{fmt(r['ratio_median']):>9} {fmt(r['ratio_p95']):>9}")
    by = {r["name"]: r for r in m["commands"]}
    for a, b, what in (("runbox", "runbox --net none", "runbox network part (gateway - none)"),
                       ("bwrap", "bwrap --share-net", "bwrap netns (unshare-all - share-net)")):
        if a in by and b in by:
            print(f"{what}: median {by[a]['median_ms'] - by[b]['median_ms']:+.2f} ms, "
                  f"p95 {by[a]['p95_ms'] - by[b]['p95_ms']:+.2f} ms")
    for s in m["not_run"]:
        print(f"not run: {s['name']}: {s['reason']}")
    if m["memory"]:
        print(f"\n{mode}: supervisor memory, median of 5 steps sampled mid-step "
              "(MiB; tree = runner + its children + payload)")
        head = f"{'runner':<10} {'VmHWM':>7} {'VmRSS':>7} {'Pss':>7} {'tree Pss':>9} {'procs':>5} {'maxrss':>7}"
        print(head)
        print("-" * len(head))
        for name, x in m["memory"].items():
            if "error" in x:
                print(f"{name:<10} not measured: {x['error']}")
                continue
            print(f"{name:<10} {fmt(mib(x['hwm_kb'])):>7} {fmt(mib(x['rss_kb'])):>7} "
                  f"{fmt(mib(x['pss_kb'])):>7} {fmt(mib(x['tree_pss_kb'])):>9} "
                  f"{fmt(x['tree_procs'], '.0f'):>5} {fmt(mib(x['maxrss_kb'])):>7}")


def main():
    outdir, modes = sys.argv[1], sys.argv[2:]
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "versions": {
            "hyperfine": version(["hyperfine", "--version"]),
            "bwrap": version(["bwrap", "--version"]),
            "runc": version(["runc", "--version"]),
            "crun": version(["crun", "--version"]),
        },
        "method": "%s interleaved rounds of hyperfine -N, %s runs and %s warmups per command in all; "
                  "payload: a static true" % (os.environ.get("BENCH_ROUNDS", "10"), os.environ.get("BENCH_RUNS", "200"),
                                               os.environ.get("BENCH_WARMUP", "10")),
        "modes": {},
    }
    for mode in modes:
        m = load_mode(outdir, mode)
        result["modes"][mode] = m
        print_mode(mode, m)
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {os.path.join(outdir, 'results.json')}")


if __name__ == "__main__":
    main()
