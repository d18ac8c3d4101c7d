#!/usr/bin/env python3
"""runbox on a host with a packet filter, against the same host without one, paired.

Usage: filter_hooks.py OUT.json [ROUNDS]  (as root, from the checkout; ROUNDS 12, 5 runs each way)

The kernel guards its netfilter hook sites with static keys: when the first hook of a kind is
registered on the host, and when the last one goes, it patches its code and waits for every
CPU. runbox's table registers two hooks (an inet output chain: IPv4 and IPv6), so on a
host with no packet filter every run pays that, and its namespace's teardown again; on a host
with one (Docker's, ufw's or firewalld's rules) none does. Each round times `runbox run --image
minimal -- /bin/true` 5 times without, then 5 times while a network namespace of this script's
own holds an inet table with an output chain (a sleeping process keeps it; it is gone
at the end of the round). bwrap uses no netfilter hook and is not timed here.
"""
import json
import statistics
import subprocess
import sys
import time

RULES = """table inet bench_filter {
  chain output { type filter hook output priority 0; policy accept; }
}
"""
CMD = ["./runbox", "run", "--image", "minimal", "--", "/bin/true"]


def timed():
    t = time.perf_counter()
    r = subprocess.run(CMD, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode:
        sys.exit(f"filter_hooks: runbox exited {r.returncode}")
    return (time.perf_counter() - t) * 1000


def keeper():
    p = subprocess.Popen(["unshare", "--net", "sh", "-c", "nft -f - && echo ready && exec sleep 100000"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    p.stdin.write(RULES)
    p.stdin.close()
    if p.stdout.readline().strip() != "ready":
        sys.exit("filter_hooks: could not hold an nftables table in a network namespace")
    return p


def main():
    out = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    without, held = [], []
    for _ in range(3):
        timed()
    for _ in range(rounds):
        time.sleep(0.3)  # the last keeper's namespace goes in a kworker
        without += [timed() for _ in range(5)]
        k = keeper()
        time.sleep(0.3)
        held += [timed() for _ in range(5)]
        k.kill()
        k.wait()
    a, b = statistics.median(without), statistics.median(held)
    print(f"runbox on a host with a packet filter (paired, {rounds} rounds of 5 runs each way): "
          f"median {a:.2f} ms without, {b:.2f} ms with: {b - a:+.2f} ms")
    with open(out, "w") as f:
        json.dump({"rounds": rounds, "without_ms": without, "with_ms": held,
                   "median_without_ms": a, "median_with_ms": b}, f)


if __name__ == "__main__":
    main()
