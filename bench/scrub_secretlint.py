#!/usr/bin/env python3
"""The comparison in make bench-scrub: the same corpus records through secretlint (with its
recommended preset). split CORPUS DIR writes one file per record; report CORPUS DIR JSON
prints, per family, how many records secretlint flagged, and its flags on negatives."""
import collections
import json
import os
import sys


def records(corpus):
    with open(corpus) as f:
        return [json.loads(line) for line in f]


def split(corpus, d):
    os.makedirs(d, exist_ok=True)
    for i, rec in enumerate(records(corpus)):
        with open(os.path.join(d, "r%05d.txt" % i), "w") as f:
            f.write(rec["text"])


def report(corpus, d, out):
    with open(out) as f:
        text = f.read()
    flagged = set()
    for res in json.loads(text or "[]"):
        if res.get("messages"):
            flagged.add(os.path.basename(res["filePath"]))
    fam = collections.OrderedDict()
    neg = fp = 0
    for i, rec in enumerate(records(corpus)):
        hit = ("r%05d.txt" % i) in flagged
        if not rec["secret"]:
            neg += 1
            fp += hit
            continue
        n, h = fam.get(rec["family"], (0, 0))
        fam[rec["family"]] = (n + 1, h + hit)
    print("\nsecretlint (records with a finding; it reports, it does not redact)")
    print("%-28s %6s %8s" % ("family", "cases", "flagged"))
    tot = hits = 0
    for k, (n, h) in fam.items():
        print("%-28s %6d %8.3f" % (k, n, h / n))
        tot += n
        hits += h
    print("secretlint flagged, all: %d/%d = %.4f; on negatives: %d of %d" % (hits, tot, hits / tot, fp, neg))


if __name__ == "__main__":
    if sys.argv[1] == "split":
        split(sys.argv[2], sys.argv[3])
    else:
        report(sys.argv[2], sys.argv[3], sys.argv[4])
