#!/usr/bin/env python3
"""Peak memory of each runner's own (supervisor) process, for bench/run.sh.

Usage: rss.py OUT.json NAME=COMMAND...  Each COMMAND runs a step that sleeps ~400 ms. Each
runs under GNU time, whose child is the runner's supervisor (setpriv execs in place):
mid-step we read the supervisor's VmHWM, VmRSS and Pss and the Pss of its whole tree; when it
ends, time's %M (wait4's ru_maxrss: the largest RSS in the tree it reaped, payload included).
time is the spawner because ru_maxrss survives fork and exec: a child forked from this
python would start at python's RSS.
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import time

TRIES = 5
SAMPLE_AFTER = 0.2  # seconds into a ~0.4 s step
GNU_TIME = "/usr/bin/time"
MARK = "rbbench-maxrss "


def status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def tree(pid):
    """pid and its descendants (this kernel lacks /proc/PID/task/TID/children)."""
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    st = f.read()
                parent[int(d)] = int(st[st.rindex(")") + 2 :].split()[1])
            except (OSError, ValueError):
                pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(c for c, pp in parent.items() if pp == p)
    return out


def measure(argv):
    proc = subprocess.Popen([GNU_TIME, "-f", MARK + "%M", *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(SAMPLE_AFTER)
    pids = tree(proc.pid)[1:]  # without time itself; pids[0] is the supervisor
    sup = pids[0] if pids else -1
    sample = {
        "hwm_kb": status_kb(sup, "VmHWM"),
        "rss_kb": status_kb(sup, "VmRSS"),
        "pss_kb": pss_kb(sup),
    }
    tree_pss = [pss_kb(p) for p in pids]
    sample["tree_pss_kb"] = sum(x for x in tree_pss if x) or None
    sample["tree_procs"] = len(pids)
    err = proc.stderr.read().decode(errors="replace").splitlines()
    proc.stderr.close()
    rc = proc.wait()
    sample["maxrss_kb"] = next((int(l[len(MARK):]) for l in err if l.startswith(MARK)), None)
    sample["ok"] = rc == 0
    rest = [l for l in err if not l.startswith(MARK) and "exited with non-zero" not in l]
    sample["error"] = (rest[-1] if rest else f"exit {rc}") if rc else None
    return sample


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    out, entries = sys.argv[1], sys.argv[2:]
    results = {}
    if not os.access(GNU_TIME, os.X_OK):
        entries = []
        results["all"] = {"error": f"{GNU_TIME} missing (Debian package `time`)"}
    for entry in entries:
        name, _, cmd = entry.partition("=")
        samples = [measure(shlex.split(cmd)) for _ in range(TRIES)]
        good = [s for s in samples if s["ok"]]
        if not good:
            results[name] = {"command": cmd, "error": samples[-1]["error"] or "failed"}
            continue
        results[name] = {"command": cmd, "tries": len(good)}
        for key in ("hwm_kb", "rss_kb", "pss_kb", "tree_pss_kb", "maxrss_kb", "tree_procs"):
            results[name][key] = median(s[key] for s in good)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
