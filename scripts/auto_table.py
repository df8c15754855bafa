#!/usr/bin/env python3
"""`auto` against everything a user could run by hand (issue 31, docs/results.md): per row of
scripts/bench_fastpath.sh (input, n, output) the winner among every fixed zen scheme and the raw
baselines mpi_allreduce / mpi_allgatherv (median of the steady-state run), auto's choice (the scheme
it ran in its timed calls), auto / best in the steady state (medians, same run) and over a job's first
20 calls (means of the -m20 run: -n 20 -w 0 --auto-settle 0, auto's decision calls and every scheme's
cold first call included; best = the lowest mean of the others in that run).
   usage: scripts/auto_table.py OUT             (OUT: bench_fastpath.sh's output folder)
          scripts/auto_table.py --cluster OUT   (OUT: bench_cluster_auto.sh's: one row per link rate,
                                                 hosts x ranks per host and output)
          --remembered: the 20-call columns from the -m20c runs (ZEN_AUTO_CACHE=1: a later job, auto
          starting from the decisions the steady-state run remembered)"""
import json
import os
import re
import sys


def rows_of(path, kind):
    with open(path) as f:
        d = json.load(f)
    groups = {}
    for r in d["rows"]:
        if kind == "brown":
            label = "Brown as emitted" if r["trace"].rstrip("/").endswith("-occ") else "Brown coalesced"
        else:
            label = f"demo {r['size'] >> 20} MB"
        groups.setdefault(label, {})[r["scheme"]] = r
    return groups, d.get("total_wrong", 0)


def fixed_of(t):
    """The fixed schemes of a row: every scheme but auto and the twins (NAME#TAG: a second instance
    of NAME timed beside it, bench_fastpath.sh's ZEN_TWINS), which measure noise and are no choice."""
    return {s: r for s, r in t.items() if s != "auto" and "#" not in s}


def table_row(first, g, g20):
    """Markdown rows for one run pair (steady-state groups g, 20-call groups g20); first(label) gives
    the leading cells. Returns (lines, rows meeting both goals)."""
    lines, met = [], 0
    for label, t in g.items():
        if "auto" not in t:
            continue
        others = fixed_of(t)
        win = min(others, key=lambda s: others[s]["time_us"])
        a = t["auto"]
        ran = a.get("ran", {})
        choice = max(ran, key=ran.get) if ran else "-"
        r1 = a["time_us"] / others[win]["time_us"]
        cells = [f"{win} {others[win]['time_us'] / 1000:.3f}", choice, f"{a['time_us'] / 1000:.3f}", f"{r1:.2f}x"]
        ok = r1 <= 1.10
        t20 = g20.get(label, {})
        if "auto" in t20:
            o20 = fixed_of(t20)
            b20 = min(o20, key=lambda s: o20[s]["mean_us"])
            r2 = t20["auto"]["mean_us"] / o20[b20]["mean_us"]
            cells += [f"{b20} {o20[b20]['mean_us'] / 1000:.3f}", f"{t20['auto']['mean_us'] / 1000:.3f}", f"{r2:.2f}x"]
            ok = ok and r2 <= 1.10
        else:
            cells += ["-", "-", "-"]
        met += ok
        lines.append(f"| {first(label)} | " + " | ".join(cells) + f" | {'yes' if ok else 'no'} |")
    return lines, met


HEAD = ("winner (ms) | auto's choice | auto (ms) | auto / best | 20-call: best mean (ms) | auto mean (ms) | "
        "auto / best | <= 1.10x |")


def runs(steady, kind, m20_suffix="-m20"):
    """(steady groups, 20-call groups, #wrong of both) of a steady-state JSON and its -m20 twin (or,
    with --remembered, its -m20c twin: the 20-call run of a later job, auto's decisions remembered)."""
    g, w = rows_of(steady, kind)
    m20 = steady[:-len(".json")] + m20_suffix + ".json"
    g20, w20 = rows_of(m20, kind) if os.path.exists(m20) else ({}, 0)
    return g, g20, w + w20


def main():
    args = sys.argv[1:]
    cluster = "--cluster" in args
    suffix = "-m20c" if "--remembered" in args else "-m20"
    args = [a for a in args if a not in ("--cluster", "--remembered")]
    out = args[0] if args else ("bench-out/cluster-auto" if cluster else "bench-out")
    wrong = rows = met = 0
    if cluster:
        print("| link | hosts x ranks | output | " + HEAD)
        print("|---|---|---|---|---|---:|---:|---|---:|---:|---|")
        found = []
        for name in os.listdir(out):
            m = re.fullmatch(r"(\d+)([gm]bit)-(\d+)x(\d+)-(dense|sparse)\.json", name)
            if m:
                found.append((m.group(2) != "gbit", int(m.group(1)), int(m.group(3)), int(m.group(4)),
                              m.group(5) == "sparse", name, m))
        for *_, name, m in sorted(found):
            g, g20, w = runs(os.path.join(out, name), "brown", suffix)
            wrong += w
            first = lambda label, m=m: f"{m.group(1)} {m.group(2)[0].upper()}bit/s | {m.group(3)} x {m.group(4)} | {m.group(5)}"
            lines, ok = table_row(first, g, g20)
            rows += len(lines)
            met += ok
            print("\n".join(lines))
    else:
        print("| input | n | output | " + HEAD)
        print("|---|---|---|---|---|---:|---:|---|---:|---:|---|")
        for kind in ("brown", "demo"):
            for n in (2, 4):
                for output in ("sparse", "dense"):
                    steady = os.path.join(out, f"{kind}-n{n}-{output}.json")
                    if not os.path.exists(steady):
                        continue
                    g, g20, w = runs(steady, kind, suffix)
                    wrong += w
                    lines, ok = table_row(lambda label, n=n, output=output: f"{label} | {n} | {output}", g, g20)
                    rows += len(lines)
                    met += ok
                    if lines:
                        print("\n".join(lines))
    print(f"\nboth goals hold in {met} of {rows} rows")
    print(f"total #wrong: {wrong}")


if __name__ == "__main__":
    main()
