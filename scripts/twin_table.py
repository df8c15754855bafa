#!/usr/bin/env python3
"""The noise of one zen_perf run (issue 31, docs/results.md): every scheme named twice (NAME and
NAME#TAG, e.g. ZEN_SCHEMES=allgather,allgather#2,... scripts/bench_fastpath.sh OUT) is the same code
timed twice in the same interleaved rounds. Per row and scheme: both medians and slower / faster; at
the end how many pairs differ by more than 1.10x, the bound issue 31 sets auto.
   usage: scripts/twin_table.py OUT   (every OUT/*.json except the -m20 runs)"""
import glob
import json
import os
import sys


def label_of(r):
    if r.get("trace"):
        return "Brown as emitted" if r["trace"].rstrip("/").endswith("-occ") else "Brown coalesced"
    return f"demo {r['size'] >> 20} MB"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    print("| run | input | scheme | time (ms) | twin (ms) | slower / faster |")
    print("|---|---|---|---:|---:|---:|")
    ratios = []
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        if path.endswith("-m20.json"):
            continue
        with open(path) as f:
            d = json.load(f)
        rows = {}
        for r in d["rows"]:
            rows.setdefault(label_of(r), {})[r["scheme"]] = r
        for label, t in rows.items():
            for s, r in t.items():
                if "#" in s or not any(x.startswith(s + "#") for x in t):
                    continue
                for twin in sorted(x for x in t if x.startswith(s + "#")):
                    a, b = r["time_us"], t[twin]["time_us"]
                    q = max(a, b) / min(a, b)
                    ratios.append(q)
                    print(f"| {os.path.basename(path)[:-5]} | {label} | {s} | {a / 1000:.3f} | {b / 1000:.3f} | {q:.2f}x |")
    if ratios:
        ratios.sort()
        over = sum(q > 1.10 for q in ratios)
        print(f"\n{len(ratios)} pairs: slower / faster median {ratios[len(ratios) // 2]:.2f}x, max {ratios[-1]:.2f}x; "
              f"{over} of {len(ratios)} above 1.10x")


if __name__ == "__main__":
    main()
