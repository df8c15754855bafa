#!/usr/bin/env python3
"""The report of scripts/demo.sh, and README's Results section made from it.

  demo_report.py summarize --out DIR --shm SHM.json [--cluster CLUSTER.json | --cluster-skipped WHY]
                           [--ranks P] [--hosts H] [--rate 1gbit] [--seconds NAME=S ...]
      From the zen_perf JSON of each setting: DIR/demo.json (every scheme's times and bytes, the
      ratios, the three summary lines), DIR/results.md (the full table), DIR/demo.png (time per
      scheme, both settings; gnuplot), then prints where they are and the three lines, each a ratio
      measured in this run. Exit 2 if any result was wrong (#wrong > 0).
  demo_report.py readme [--from DIR] [--check]
      README.md's Results section (between its demo-results markers) from docs/demo.json; --from DIR
      first copies DIR/demo.json and DIR/demo.png to docs/demo.json and docs/img/demo.png; --check
      changes nothing and exits 1 if README.md is not what docs/demo.json makes.

Python's standard library only (run with /usr/bin/python3)."""
import argparse
import datetime
import difflib
import json
import os
import re
import shutil
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# zen's fixed schemes (what `auto` chooses among, and more), then the raw MPI baselines.
FIXED = ["balanced", "allgather", "sparcml", "sparse_ps", "omnireduce", "dense_native", "dense"]
RAW = ["mpi_allreduce", "mpi_allgatherv"]
ORDER = FIXED + ["auto"] + RAW
NAMES = {"mpi_allreduce": "MPI_Allreduce", "mpi_allgatherv": "hand-written MPI_Allgatherv"}
BEGIN = "<!-- demo-results:begin (made by scripts/demo_report.py readme from docs/demo.json; do not edit) -->"
END = "<!-- demo-results:end -->"


def ratio(x):
    return f"{x:.1f}x" if x >= 2 else f"{x:.2f}x"


def rate_label(rate):
    m = re.fullmatch(r"(\d+)(g|m|k)bit", rate.lower())
    return f"{m.group(1)} {m.group(2).upper()}bit/s" if m else rate


def setting(path, key, label, extra):
    with open(path) as f:
        d = json.load(f)
    rows = {}
    for r in d["rows"]:
        x = {"time_ms": r["time_us"] / 1e3, "min_ms": r["time_min_us"] / 1e3, "max_ms": r["time_max_us"] / 1e3,
             "sent_B": r["sent_B"], "recv_B": r["recv_B"], "wrong": r["wrong"], "encoding": r.get("encoding", "")}
        for k in ("ran", "decision", "decisions"):
            if k in r:
                x[k] = r[k]
        rows[r["scheme"]] = x
    missing = [s for s in ["balanced", "auto"] + RAW if s not in rows]
    if missing:
        sys.exit(f"demo_report.py: {path} lacks the schemes {', '.join(missing)}")
    first = d["rows"][0]
    s = {"key": key, "label": label, "ranks": d["ranks"], "rows": rows, "total_wrong": d["total_wrong"],
         "iters": d["config"]["iters"], "warmup": d["config"]["warmup"], "density": first["density"],
         "gamma": first["gamma"], "N": first["count"], "trace": d["config"]["trace"]}
    s.update(extra)
    t = {k: v["time_ms"] for k, v in rows.items()}
    s["balanced_vs_mpi_allreduce"] = t["mpi_allreduce"] / t["balanced"]
    s["balanced_vs_mpi_allgatherv"] = t["mpi_allgatherv"] / t["balanced"]
    best = min((k for k in FIXED if k in t), key=lambda k: t[k])
    chose = sorted(rows["auto"].get("ran", {}).items(), key=lambda kv: -kv[1])
    s["auto"] = {"chose": [k for k, _ in chose], "ran": dict(chose), "best_fixed": best, "time_vs_best": t["auto"] / t[best],
                 "decision": rows["auto"].get("decision", {})}
    return s


def auto_phrase(s):
    a = s["auto"]
    ran = a["ran"]
    chose = a["chose"][0] if len(a["chose"]) == 1 else ", ".join(f"{k} x{ran[k]}" for k in a["chose"]) or "?"
    r = a["time_vs_best"]
    if r <= 1.0:
        how = f"as fast as the best fixed scheme, {a['best_fixed']}: {r:.2f}x its time"
    else:
        how = f"within {100 * (r - 1):.0f} % of the best fixed scheme, {a['best_fixed']}"
    return f"{chose} on {s['label']} ({how})"


def summary_lines(settings, skipped):
    l1 = "zen balanced vs MPI_Allreduce: " + ", ".join(
        f"{ratio(s['balanced_vs_mpi_allreduce'])} ({s['label']})" for s in settings)
    l2 = "zen balanced vs hand-written MPI_Allgatherv: " + ", ".join(
        f"{ratio(s['balanced_vs_mpi_allgatherv'])} ({s['label']})" for s in settings)
    l3 = "auto chose " + " and ".join(auto_phrase(s) for s in settings)
    dec = [s["auto"]["decision"] for s in settings if s["auto"]["decision"]]
    if dec:
        calls = sorted({d["calls"] for d in dec})
        each = " each" if len(dec) > 1 and len(calls) == 1 else ""
        timed = sum(d.get("timed", 0) for d in dec)
        l3 += f", after {' and '.join(map(str, calls))} decision calls{each}, " + (
            "untimed" if timed == 0 else f"{timed} of them timed")
    if skipped:
        l1 += " (cluster part skipped)"
    return [l1, l2, l3]


def machine():
    m = {"cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    m["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        v = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=20).stdout
        m["mpi"] = v.splitlines()[0].strip() if v else ""
    except (OSError, subprocess.SubprocessError):
        pass
    return m


def table(d, readme=False):
    """Markdown table: one row per scheme, per setting its time and the ratios to the raw baselines."""
    sets = d["settings"]
    head = "| scheme |"
    rule = "|---|"
    for s in sets:
        if readme:
            head += f" {s['label']}: ms | vs `MPI_Allreduce` |"
            rule += "---:|---:|"
        else:
            head += f" {s['label']}: ms | min..max ms | sent MB | vs MPI_Allreduce | vs MPI_Allgatherv |"
            rule += "---:|---:|---:|---:|---:|"
    out = [head, rule]
    names = [k for k in ORDER if any(k in s["rows"] for s in sets)]
    names += sorted({k for s in sets for k in s["rows"]} - set(names))
    for k in names:
        label = {"mpi_allreduce": "`MPI_Allreduce`", "mpi_allgatherv": "hand-written `MPI_Allgatherv`"}.get(k, f"zen `{k}`")
        if readme and k in ("balanced", "auto"):
            label = f"**{label}**"
        line = f"| {label} |"
        for s in sets:
            r = s["rows"].get(k)
            if r is None:
                line += " - | - |" if readme else " - | - | - | - | - |"
                continue
            t = r["time_ms"]
            ar = s["rows"]["mpi_allreduce"]["time_ms"] / t
            if readme:
                line += f" {t:.1f} | {ratio(ar)} |"
            else:
                av = s["rows"]["mpi_allgatherv"]["time_ms"] / t
                line += f" {t:.2f} | {r['min_ms']:.2f}..{r['max_ms']:.2f} | {r['sent_B'] / 1e6:.2f} | {ratio(ar)} | {ratio(av)} |"
        out.append(line)
    return out


def workload_text(d):
    w = d["workload"]
    return (f"Brown-corpus embedding gradient (D = {w['row_width']}, N = {w['N']:,} f32, "
            f"{100 * w['density']:.1f} % of the rows per rank, gamma {w['gamma']:.2f}), dense output")


def plot(d, out):
    dat = os.path.join(out, "demo.dat")
    sets = d["settings"]
    names = [k for k in ORDER if all(k in s["rows"] for s in sets)]
    with open(dat, "w") as f:
        f.write("# scheme " + " ".join(f'"{s["label"]}"' for s in sets) + "  (median ms per call)\n")
        for k in names:
            f.write(f'"{NAMES.get(k, k)}" ' + " ".join(f"{s['rows'][k]['time_ms']:.4f}" for s in sets) + "\n")
    png = os.path.join(out, "demo.png")
    gp = [
        "set terminal pngcairo size 1100,620 font ',10'",
        f"set output '{png}'",
        "set termoption noenhanced",
        f"set title 'zen demo: {workload_text(d)}'",
        "set style data histograms",
        "set style histogram clustered gap 1",
        "set style fill solid 0.85 border -1",
        "set boxwidth 0.9",
        "set logscale y",
        "set ylabel 'median ms per call, slowest rank (log scale)'",
        "set xtics rotate by -30 scale 0",
        "set bmargin 7",
        "set rmargin 12",
        "set grid ytics",
        "set key top left",
        "set linetype 1 lc rgb '#1f77b4'",
        "set linetype 2 lc rgb '#ff7f0e'",
    ]
    cols = ", ".join(
        (f"'{dat}'" if i == 0 else "''") + f" using {i + 2}" + (":xtic(1)" if i == 0 else "") + f" lt {i + 1} title '{s['label']}'"
        for i, s in enumerate(sets))
    gp.append("plot " + cols)
    with open(os.path.join(out, "demo.gp"), "w") as f:
        f.write("\n".join(gp) + "\n")
    if not shutil.which("gnuplot"):
        return None, "gnuplot not found (apt-get install gnuplot-nox): no PNG"
    r = subprocess.run(["gnuplot", os.path.join(out, "demo.gp")], capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(png):
        return None, "gnuplot failed: " + r.stderr.strip()
    return png, None


def summarize(a):
    out = os.path.abspath(a.out)
    hl = f"{a.hosts} hosts, {rate_label(a.rate)}"
    sl = f"shared memory, {a.ranks} ranks"
    sets = []
    if a.cluster:
        sets.append(setting(a.cluster, "cluster", hl, {"hosts": a.hosts, "rate": a.rate}))
    sets.append(setting(a.shm, "shm", sl, {}))
    meta = {}
    tj = os.path.join(sets[0]["trace"], "trace.json")
    if os.path.exists(tj):
        with open(tj) as f:
            meta = json.load(f)
    d = {
        "command": "scripts/demo.sh",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine(),
        "workload": {"name": "Brown-corpus embedding gradient", "trace": "zen_trace corpus -n 8 -B 256 -D 64 -T 4 --row-level",
                     "N": sets[0]["N"], "row_width": meta.get("row_width", 64), "iterations": meta.get("iterations"),
                     "density": sets[-1]["density"], "gamma": sets[-1]["gamma"], "output": "dense"},
        "settings": [{k: v for k, v in s.items() if k != "trace"} for s in sets],
        "cluster_skipped": a.cluster_skipped or "",
        "total_wrong": sum(s["total_wrong"] for s in sets),
        "seconds": {k: float(v) for k, v in (x.split("=", 1) for x in a.seconds)},
    }
    d["lines"] = summary_lines(sets, a.cluster_skipped)
    png, why = plot(d, out)
    d["png"] = bool(png)
    with open(os.path.join(out, "demo.json"), "w") as f:
        json.dump(d, f, indent=2)
        f.write("\n")
    md = [f"# zen demo: {workload_text(d)}", "",
          f"`scripts/demo.sh`, {d['date']}, {d['machine'].get('cores')} cores ({d['machine'].get('cpu', '?')}), "
          f"{d['machine'].get('mpi', 'MPI')}; every scheme and the raw MPI baselines in the same zen_perf run "
          f"({sets[0]['iters']} timed iterations after {sets[0]['warmup']} warm-up round(s), interleaved; `auto` called "
          "untimed until its first decision was over), results checked against a reference of every rank's input.",
          "time: median ms per call of the slowest rank; min..max: fastest and slowest call; sent: the busiest rank's "
          "bytes per call; vs X: time(X) / time(scheme).", ""]
    if a.cluster_skipped:
        md += [f"Cluster part skipped: {a.cluster_skipped}", ""]
    md += table(d) + ["", f"total #wrong: {d['total_wrong']}", ""]
    for s in sets:
        r = s["rows"]["auto"]
        dec = r.get("decision", {})
        if dec:
            md.append(f"- auto ({s['label']}): decided in {dec['calls']} calls ({dec['timed']} of them timed, "
                      f"{dec['ms']:.1f} ms in all); timed calls ran " +
                      ", ".join(f"{k} x{v}" for k, v in r.get("ran", {}).items()))
        for text in r.get("decisions", []):
            md.append(f"  - {text}")
    md += ["", "Summary:", ""] + [f"    {x}" for x in d["lines"]] + [""]
    if png:
        md += ["![time per scheme](demo.png)", ""]
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(md))
    rel = os.path.relpath(out)
    rel = out if rel.startswith("..") else rel
    where = f"full table {rel}/results.md, JSON {rel}/demo.json, "
    where += f"plot {rel}/demo.png" if png else f"no plot ({why})"
    secs = d["seconds"]
    if "measure" in secs:
        where += f"; measured in {secs['measure']:.0f} s"
        if "total" in secs:
            where += f", {secs['total']:.0f} s in all"
    print("== results: " + where)
    if d["total_wrong"]:
        print(f"demo: {d['total_wrong']} wrong elements (see {rel}/*.txt)", file=sys.stderr)
    for x in d["lines"]:
        print(x)
    return 2 if d["total_wrong"] else 0


def readme_section(d):
    sets = d["settings"]
    m = d["machine"]
    w = d["workload"]
    text = [BEGIN, "",
            f"{workload_text(d)}: every scheme and the raw MPI baselines in the same `zen_perf` run, median ms per "
            f"call of the slowest rank, results checked (`#wrong` {d['total_wrong']}). Made by `scripts/demo.sh` "
            f"({d['date']}, {m.get('cores')} cores, {sets[0]['iters']} timed iterations); the cluster is "
            "`scripts/cluster.sh` network namespaces on this one machine, one rank per host. More hosts, 10 Gbit/s "
            "and sparse output: docs/results.md.", ""]
    if d.get("cluster_skipped"):
        text += [f"(Cluster part skipped in this run: {d['cluster_skipped']}.)", ""]
    text += table(d, readme=True)
    text += ["", "The demo's summary of that run:", "", "```"] + d["lines"] + ["```", ""]
    if d.get("png"):
        text += ["![time per scheme, both settings](docs/img/demo.png)", ""]
    text.append(END)
    return "\n".join(text)


def readme(a):
    dj = os.path.join(REPO, "docs", "demo.json")
    if a.src:
        if a.check:
            sys.exit("demo_report.py readme: --from and --check do not go together")
        shutil.copyfile(os.path.join(a.src, "demo.json"), dj)
        png = os.path.join(a.src, "demo.png")
        if os.path.exists(png):
            shutil.copyfile(png, os.path.join(REPO, "docs", "img", "demo.png"))
    with open(dj) as f:
        d = json.load(f)
    path = os.path.join(REPO, "README.md")
    with open(path) as f:
        old = f.read()
    i, j = old.find(BEGIN), old.find(END)
    if i < 0 or j < i:
        sys.exit(f"demo_report.py readme: README.md lacks the markers\n  {BEGIN}\n  {END}")
    new = old[:i] + readme_section(d) + old[j + len(END):]
    if a.check:
        if new != old:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "README.md",
                                                       "README.md from docs/demo.json"))
            print("README.md's Results section is not what docs/demo.json makes: run scripts/demo_report.py readme",
                  file=sys.stderr)
            return 1
        print("README.md's Results section matches docs/demo.json")
        return 0
    with open(path, "w") as f:
        f.write(new)
    print("README.md: Results section regenerated from docs/demo.json")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summarize")
    s.add_argument("--out", required=True)
    s.add_argument("--shm", required=True)
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--cluster")
    g.add_argument("--cluster-skipped")
    s.add_argument("--ranks", type=int, default=4)
    s.add_argument("--hosts", type=int, default=4)
    s.add_argument("--rate", default="1gbit")
    s.add_argument("--seconds", action="append", default=[])
    r = sub.add_parser("readme")
    r.add_argument("--from", dest="src")
    r.add_argument("--check", action="store_true")
    a = p.parse_args()
    return summarize(a) if a.cmd == "summarize" else readme(a)


if __name__ == "__main__":
    sys.exit(main())
