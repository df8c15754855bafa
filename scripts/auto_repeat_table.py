#!/usr/bin/env python3
"""How often a fixed choice could have met issue 31's 1.10x bound, over repeated runs of
scripts/bench_fastpath.sh (docs/results.md, "auto against everything", "Repeated runs"). Per row
(input, n, output) and per run: auto / best (steady-state medians; 20-call means), and the oracle:
the one fixed scheme (zen's or a raw baseline) whose worst ratio to the run's best over all runs is
lowest, i.e. the best any rule that picks one scheme per row could do if it knew every run in
advance. A row where even the oracle exceeds 1.10x in some run cannot meet the bound in every run
by a fixed choice; the spread of the winners' times between runs is the noise the bound sits in.
Runs with twins (bench_fastpath.sh's ZEN_TWINS: NAME#2 a second instance of NAME, timed in the same
rounds) add the noise floor: per run, the winner's twin / best, i.e. a scheme identical to the winner
that needs no decision, held to the same bound (twins are never the best or the oracle). Runs with
ZEN_AUTO_CACHE add a third table: the 20-call runs of a later job, auto starting from its remembered
decisions.
   usage: scripts/auto_repeat_table.py OUT1 OUT2 ...   (each a bench_fastpath.sh output folder)"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auto_table import fixed_of, rows_of  # noqa: E402


def groups(out, suffix):
    g = {}
    for name in sorted(os.listdir(out)):
        if not name.endswith(suffix + ".json") or (suffix == "" and name.endswith(("-m20.json", "-m20c.json"))):
            continue
        tag = name[: -len(suffix + ".json")]
        kind = "brown" if tag.startswith("brown") else "demo"
        n, output = tag.split("-")[1][1:], tag.split("-")[2]
        rows, _ = rows_of(os.path.join(out, name), kind)
        for label, t in rows.items():
            g[(label, n, output)] = t
    return g


def main(outs):
    for metric, suffix, key in (("steady state (medians)", "", "time_us"), ("20-call means", "-m20", "mean_us"),
                                ("20-call means of a later job (auto's decisions remembered: ZEN_AUTO_CACHE)", "-m20c",
                                 "mean_us")):
        runs = [groups(o, suffix) for o in outs]
        if not any(runs):
            continue
        print(f"\n{metric}: auto / best per run; the oracle's worst ratio over the runs\n")
        twins = any("#" in s for r in runs for t in r.values() for s in t)
        print("| input | n | output | auto / best per run | runs <= 1.10x | oracle | oracle's worst | winners |" +
              (" winner's twin / best per run | runs <= 1.10x |" if twins else ""))
        print("|---|---|---|---|---:|---|---:|---|" + ("---|---:|" if twins else ""))
        met = oracle_met = twin_met = twin_rows = total = 0
        every, every_twin = [], []  # every run's ratio of every row
        for row in sorted(runs[0]):
            per = [r[row] for r in runs if row in r]
            if len(per) < len(runs) or any("auto" not in t for t in per):
                continue
            total += 1
            ratios, winners, twin = [], [], []
            fixed = set.intersection(*[set(fixed_of(t)) for t in per])
            for t in per:
                best = min(t[s][key] for s in fixed)
                ratios.append(t["auto"][key] / best)
                winners.append(min(fixed, key=lambda s: t[s][key]))
                if winners[-1] + "#2" in t:
                    twin.append(t[winners[-1] + "#2"][key] / best)
            worst = {s: max(t[s][key] / min(t[x][key] for x in fixed) for t in per) for s in fixed}
            oracle = min(worst, key=worst.get)
            every += ratios
            every_twin += twin
            ok = sum(r <= 1.10 for r in ratios)
            met += ok == len(per)
            oracle_met += worst[oracle] <= 1.10
            line = (f"| {row[0]} | {row[1]} | {row[2]} | " + " ".join(f"{r:.2f}" for r in ratios) +
                    f" | {ok} / {len(per)} | {oracle} | {worst[oracle]:.2f}x | {', '.join(sorted(set(winners)))} |")
            if twins:  # only where every run timed its winner's twin
                full = len(twin) == len(per)
                tok = sum(r <= 1.10 for r in twin)
                line += (" " + " ".join(f"{r:.2f}" for r in twin) + f" | {tok} / {len(per)} |") if full else " - | - |"
                twin_rows += full
                twin_met += full and tok == len(per)
            print(line)
        print(f"\nauto within 1.10x in every run: {met} of {total} rows; the oracle (one fixed scheme per row, "
              f"chosen knowing all runs): {oracle_met} of {total}")
        if twins:
            print(f"the winner's twin within 1.10x in every run: {twin_met} of the {twin_rows} rows where every run "
                  f"timed it")
        for name, v in (("auto", every), ("the winner's twin", every_twin)):
            if v:
                print(f"{name} / best over every row and run: median {statistics.median(v):.3f}, mean "
                      f"{statistics.mean(v):.3f}, above 1.10x in {sum(r > 1.10 for r in v)} of {len(v)}")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
