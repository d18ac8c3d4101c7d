#!/usr/bin/env python3
"""Merges the hyperfine exports of bench/run.sh's rounds into one, as if one hyperfine run.

Usage: merge_rounds.py OUT.json ROUND.json...  Each round timed every command a few times,
one command after another; the rounds alternate, so a slow spell of the host (on a shared VM
the floor itself drifts by half within minutes) falls on every command alike instead of on
whichever command hyperfine happened to be timing then. times are concatenated; mean, user and
system are re-averaged over all runs.
"""
import json
import statistics
import sys


def main():
    out, rounds = sys.argv[1], sys.argv[2:]
    merged = {}
    order = []
    for path in rounds:
        with open(path) as f:
            for r in json.load(f)["results"]:
                name = r["command"]
                if name not in merged:
                    merged[name] = {"command": name, "times": [], "user_sum": 0.0, "system_sum": 0.0}
                    order.append(name)
                m = merged[name]
                n = len(r["times"])
                m["times"] += r["times"]
                m["user_sum"] += r.get("user", 0.0) * n
                m["system_sum"] += r.get("system", 0.0) * n
    results = []
    for name in order:
        m = merged[name]
        t = m["times"]
        results.append({
            "command": name,
            "mean": statistics.fmean(t),
            "median": statistics.median(t),
            "min": min(t),
            "max": max(t),
            "user": m["user_sum"] / len(t),
            "system": m["system_sum"] / len(t),
            "times": t,
        })
    with open(out, "w") as f:
        json.dump({"results": results, "rounds": len(rounds)}, f)


if __name__ == "__main__":
    main()
