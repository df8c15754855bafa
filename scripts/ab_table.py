#!/usr/bin/env python3
"""Tables of scripts/bench_ab.sh: per row, each zen scheme's speed relative to a raw MPI baseline
(baseline time / scheme time, both from the same zen_perf run; > 1: zen faster) for build A and build
B, every repetition; then per ratio the geometric mean over rows of B / A, the worst row, and how far
two repetitions of one build lie apart (the machine's noise).
   usage: scripts/ab_table.py OUT"""
import glob
import json
import math
import os
import statistics
import sys

RATIOS = [("balanced", "mpi_allreduce"), ("balanced", "mpi_allgatherv"), ("sparse_ps", "mpi_allreduce"),
          ("allgather", "mpi_allgatherv"), ("dense_native", "mpi_allreduce")]


def load(path):
    with open(path) as f:
        d = json.load(f)
    rows = {}
    for r in d["rows"]:
        if r.get("trace"):
            label = "Brown as emitted" if r["trace"].rstrip("/").endswith("-occ") else "Brown"
        else:
            label = f"demo {r['size'] >> 20} MB"
        rows.setdefault(label, {})[r["scheme"]] = r["time_us"]
    return rows, d.get("total_wrong", 0)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-out/ab"
    reps = sorted({int(p.rsplit("-r", 1)[1]) for p in glob.glob(os.path.join(out, "A-r*"))})
    if not reps:
        sys.exit(f"ab_table.py: no A-r* folders in {out}")
    wrong, table = 0, []
    for kind in ("brown", "demo"):
        for n in (2, 4):
            for output in ("sparse", "dense"):
                tag = f"{kind}-n{n}-{output}"
                runs = {}
                for side in "AB":
                    for r in reps:
                        path = os.path.join(out, f"{side}-r{r}", tag + ".json")
                        if os.path.exists(path):
                            runs[side, r], w = load(path)
                            wrong += w
                if len(runs) != 2 * len(reps):
                    continue
                for label in runs["A", reps[0]]:
                    table.append((label, n, output, {k: v[label] for k, v in runs.items()}))
    ratios = [(a, b) for a, b in RATIOS if all(a in t[3][k] and b in t[3][k] for t in table for k in t[3])]
    print("| input | n | output | " + " | ".join(f"{a} vs {b}: A → B" for a, b in ratios) + " |")
    print("|---|---|---|" + "---|" * len(ratios))
    for label, n, output, t in table:
        cells = []
        for a, b in ratios:
            side = lambda s: ", ".join(f"{t[s, r][b] / t[s, r][a]:.2f}" for r in reps)
            cells.append(f"{side('A')} → {side('B')}")
        print(f"| {label} | {n} | {output} | " + " | ".join(cells) + " |")
    print()
    print("| ratio | B / A, geometric mean over rows | worst row | repetition spread, median over rows (A, B) |")
    print("|---|---:|---:|---:|")
    for a, b in ratios:
        change, spread = [], {"A": [], "B": []}
        for _, _, _, t in table:
            mean = {}
            for s in "AB":
                v = [t[s, r][b] / t[s, r][a] for r in reps]
                mean[s] = sum(v) / len(v)
                spread[s].append((max(v) - min(v)) / mean[s])
            change.append(mean["B"] / mean["A"])
        g = math.exp(sum(map(math.log, change)) / len(change))
        print(f"| {a} vs {b} | {g:.3f} | {min(change):.2f} | "
              f"{statistics.median(spread['A']):.1%}, {statistics.median(spread['B']):.1%} |")
    print(f"\n#wrong over every run: {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
