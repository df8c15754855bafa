#!/usr/bin/env python3
"""The table of scripts/bench_first_calls.sh: a job's first 20 calls, one process per scheme. Per row
(input, n, output): every scheme's mean per call (zen_perf's mean_us, cold first call and auto's
decision included), median over the repetitions; the best fixed scheme (zen's or a raw baseline);
auto's first job (nothing remembered) and a later job (auto.cache) against it; and the spread of the
best scheme's own repetitions (slowest / fastest), the noise a 1.10x bound sits in.
   usage: scripts/first_calls_table.py OUT [--tag TAG]"""
import collections
import json
import os
import re
import statistics
import sys

LABELS = {"brown": "Brown coalesced", "brown-occ": "Brown as emitted"}
NAME = re.compile(r"^(?P<tag>.+-n\d+-(?:sparse|dense))-r(?P<rep>\d+)-(?P<name>[a-z_\-]+)\.json$")


def collect(out):
    """{tag: {name: [(rep, mean_us, ran, decisions)]}}, total #wrong."""
    runs, wrong = collections.defaultdict(lambda: collections.defaultdict(list)), 0
    for f in sorted(os.listdir(out)):
        m = NAME.match(f)
        if not m:
            continue
        with open(os.path.join(out, f)) as fh:
            d = json.load(fh)
        wrong += d.get("total_wrong", 0)
        if len(d["rows"]) != 1:
            raise SystemExit(f"{f}: want one row, got {len(d['rows'])}")
        r = d["rows"][0]
        runs[m["tag"]][m["name"]].append((int(m["rep"]), r["mean_us"], r.get("ran", {}), r.get("decisions", [])))
    return runs, wrong


def row_of(tag, per):
    fixed = {s: statistics.median(t for _, t, _, _ in v) for s, v in per.items() if not s.startswith("auto")}
    if not fixed or "auto" not in per:
        return None
    best = min(fixed, key=fixed.get)
    reps = [t for _, t, _, _ in per[best]]
    ran = collections.Counter()
    for _, _, r, _ in per["auto"]:
        ran.update(r)
    a = statistics.median(t for _, t, _, _ in per["auto"])
    # Paired: auto's job against the best scheme's job of the same repetition (run minutes apart).
    by_rep = {rep: t for rep, t, _, _ in per[best]}
    paired = statistics.median(t / by_rep[rep] for rep, t, _, _ in per["auto"] if rep in by_rep)
    later_paired = (statistics.median(t / by_rep[rep] for rep, t, _, _ in per["auto-later"] if rep in by_rep)
                    if "auto-later" in per else None)
    later = statistics.median(t for _, t, _, _ in per["auto-later"]) if "auto-later" in per else None
    row, n, output = re.match(r"^(.+)-n(\d+)-(sparse|dense)$", tag).groups()
    label = LABELS.get(row, f"demo {row[:-1]} {row[-1]}B")
    # A later job counts only if its first decision came from the cache (else it was a first job again).
    remembered = sum(bool(d) and "remembered in" in d[0] for _, _, _, d in per.get("auto-later", []))
    choice = ran.most_common(1)[0][0] if ran else "-"
    return dict(label=label, n=n, output=output, best=best, best_ms=fixed[best] / 1000, spread=max(reps) / min(reps),
                reps=len(reps), choice=choice, choice_ms=fixed[choice] / 1000 if choice in fixed else None,
                auto_ms=a / 1000, auto=a / fixed[best], paired=paired,
                later_ms=later / 1000 if later else None, later=later / fixed[best] if later else None,
                later_paired=later_paired, remembered=f"{remembered} of {len(per.get('auto-later', []))}")


def main(argv):
    out = argv[1]
    only = argv[argv.index("--tag") + 1] if "--tag" in argv else None
    runs, wrong = collect(out)
    order = ["brown", "brown-occ"]

    def place(tag):  # n, sparse before dense, then the rows in bench_first_calls.sh's order
        row, n, output = re.match(r"^(.+)-n(\d+)-(sparse|dense)$", tag).groups()
        size = order.index(row) if row in order else 2 + float(row[:-1]) * {"K": 1, "M": 1024, "G": 1 << 20}.get(row[-1], 0)
        return int(n), output != "sparse", size
    rows = [row_of(t, runs[t]) for t in sorted(runs, key=place) if only in (None, t)]
    rows = [r for r in rows if r]
    print("| input | n | output | best fixed: mean ms (median of reps) | its reps: slowest / fastest |"
          " auto's choice, run alone (ms) | auto, first job (ms) | / best | <= 1.10x | paired per repetition |"
          " auto, later job (ms) | / best | <= 1.10x | paired | later jobs that started remembered |")
    print("|---|---|---|---|---:|---|---:|---:|---|---:|---:|---:|---|---:|---:|")
    for r in rows:
        choice = f"{r['choice']} {r['choice_ms']:.3f}" if r["choice_ms"] is not None else r["choice"]
        later = (f"{r['later_ms']:.3f} | {r['later']:.2f}x | {'yes' if r['later'] <= 1.10 else 'no'} | {r['later_paired']:.2f}x"
                 if r["later"] is not None else "- | - | - | -")
        print(f"| {r['label']} | {r['n']} | {r['output']} | {r['best']} {r['best_ms']:.3f} | {r['spread']:.2f}x |"
              f" {choice} | {r['auto_ms']:.3f} | {r['auto']:.2f}x | {'yes' if r['auto'] <= 1.10 else 'no'} |"
              f" {r['paired']:.2f}x | {later} |"
              f" {r['remembered']} |")
    if only is None and rows:
        first = [r["auto"] for r in rows]
        later = [r["later"] for r in rows if r["later"] is not None]
        print(f"\nrows: {len(rows)}, repetitions per scheme: {min(r['reps'] for r in rows)}")
        print(f"first job: within 1.10x in {sum(x <= 1.10 for x in first)} of {len(first)} rows,"
              f" median auto / best {statistics.median(first):.3f}"
              f" (paired per repetition {statistics.median(r['paired'] for r in rows):.3f})")
        if later:
            print(f"later job: within 1.10x in {sum(x <= 1.10 for x in later)} of {len(later)} rows,"
                  f" median auto / best {statistics.median(later):.3f}"
                  f" (paired per repetition {statistics.median(r['later_paired'] for r in rows if r['later_paired']):.3f})")
    print(f"total #wrong: {wrong}")
    return 0 if rows and wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
