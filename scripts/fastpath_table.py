#!/usr/bin/env python3
"""The summary table of scripts/bench_fastpath.sh (docs/results.md): one markdown row per input, rank
count and output form, median ms per call of every contender and the ratios of balanced and
dense_native against the raw MPI baselines, all from the same zen_perf run.
   usage: scripts/fastpath_table.py OUT   (OUT: bench_fastpath.sh's output folder)"""
import json
import os
import sys

COLS = ["mpi_allreduce", "mpi_allgatherv", "allgather", "sparse_ps", "balanced", "dense_native"]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "bench-out"
    print("| input | n | output | " + " | ".join(COLS) +
          " | balanced vs mpi_allreduce | balanced vs mpi_allgatherv | dense_native / mpi_allreduce |")
    print("|---|---|---|" + "---:|" * (len(COLS) + 3))
    wrong = 0
    for kind in ("brown", "demo"):
        for n in (2, 4):
            for output in ("sparse", "dense"):
                path = os.path.join(out, f"{kind}-n{n}-{output}.json")
                if not os.path.exists(path):
                    continue
                with open(path) as f:
                    d = json.load(f)
                wrong += d.get("total_wrong", 0)
                groups = {}
                for r in d["rows"]:
                    if kind == "brown":
                        label = "Brown uncoalesced" if r["trace"].rstrip("/").endswith("-occ") else "Brown"
                    else:
                        label = f"demo {r['size'] >> 20} MB"
                    groups.setdefault(label, {})[r["scheme"]] = r["time_us"] / 1000.0
                for label, t in groups.items():
                    cells = [f"{t[c]:.2f}" if c in t else "-" for c in COLS]

                    def ratio(a, b, fmt):
                        return fmt.format(t[a] / t[b]) if a in t and b in t else "-"

                    print(f"| {label} | {n} | {output} | " + " | ".join(cells) + " | " +
                          ratio("mpi_allreduce", "balanced", "{:.2f}x") + " | " +
                          ratio("mpi_allgatherv", "balanced", "{:.2f}x") + " | " +
                          ratio("dense_native", "mpi_allreduce", "{:.2f}") + " |")
    print(f"\ntotal #wrong: {wrong}")


if __name__ == "__main__":
    main()
