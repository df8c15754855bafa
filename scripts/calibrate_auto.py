#!/usr/bin/env python3
"""Fits the cost model's CPU term per scheme (seconds per value of the rows touched) from zen_perf
JSON files of scripts/calibrate_auto.sh: each file times the fixed schemes beside
`auto --explain --auto-cpu none`, whose explanation lists every candidate's link-only prediction and
its rows touched ("balanced 6.47 ms (19810340 B, 8300000 rows)"). Per scheme, least squares on
relative errors of each row's fastest timed call (min_us: the least disturbed on a shared machine):
measured - predicted = value_s * rows * D + dense_s * N (both >= 0). Prints a table (worst
model/measured before and after) and the --auto-cpu argument.
   usage: scripts/calibrate_auto.py FILE.json..."""
import json
import re
import sys

PRED = re.compile(r" ([a-z_]+) ([0-9.e+-]+) (ms|us) \((\d+) B, (\d+) rows\)")


def main():
    pts = {}  # scheme -> [(measured_s, predicted_s, values)]
    for path in sys.argv[1:]:
        with open(path) as f:
            d = json.load(f)
        by_key = {}
        for r in d["rows"]:
            by_key.setdefault((r["trace"], r["size"]), {})[r["scheme"]] = r
        for key, rows in by_key.items():
            auto = rows.get("auto")
            if not auto or not auto.get("decisions"):
                continue
            text = next((t for t in auto["decisions"] if "model:" in t), None)
            if not text:
                continue
            D = int(re.search(r" D=(\d+)", text).group(1))
            for m in PRED.finditer(text.split("model:", 1)[1]):
                scheme, t, unit, _, nrows = m.groups()
                if scheme not in rows:
                    continue
                pred = float(t) * (1e-3 if unit == "ms" else 1e-6)
                meas = rows[scheme]["time_min_us"] * 1e-6
                pts.setdefault(scheme, []).append((meas, pred, int(nrows) * D, rows[scheme]["count"]))
    terms = []
    print(f"{'scheme':>14} {'ns/value':>9} {'ns/dense':>9} {'points':>6} {'worst model/measured before':>28} {'after':>8}")
    for scheme, ps in sorted(pts.items()):
        # least squares on relative errors (w = 1/m^2) of rest = a * v + b * N, then a, b clamped at >= 0
        s_vv = sum(v * v / m**2 for m, p, v, N in ps)
        s_vN = sum(v * N / m**2 for m, p, v, N in ps)
        s_NN = sum(N * N / m**2 for m, p, v, N in ps)
        s_vy = sum(v * (m - p) / m**2 for m, p, v, N in ps)
        s_Ny = sum(N * (m - p) / m**2 for m, p, v, N in ps)
        det = s_vv * s_NN - s_vN**2
        a = (s_vy * s_NN - s_Ny * s_vN) / det if det > 0 else 0.0
        b = (s_vv * s_Ny - s_vN * s_vy) / det if det > 0 else 0.0
        if a < 0 or b < 0:  # one term only: the better of the two
            a1, b1 = (max(0.0, s_vy / s_vv) if s_vv else 0.0), 0.0
            a2, b2 = 0.0, (max(0.0, s_Ny / s_NN) if s_NN else 0.0)
            err = lambda a, b: sum(((m - p) - a * v - b * N) ** 2 / m**2 for m, p, v, N in ps)
            a, b = (a1, b1) if err(a1, b1) <= err(a2, b2) else (a2, b2)
        before = [p / m for m, p, v, N in ps]
        after = [(p + a * v + b * N) / m for m, p, v, N in ps]
        worst = lambda xs: max(xs, key=lambda x: max(x, 1 / x) if x > 0 else float("inf"))
        print(f"{scheme:>14} {a * 1e9:9.3f} {b * 1e9:9.3f} {len(ps):6d} {worst(before):28.3f} {worst(after):8.3f}")
        terms.append((scheme, a, b))
    print("--auto-cpu " + ",".join(f"{s}={a:.3g}/{b:.3g}" for s, a, b in terms))
    print("C++: {" + ", ".join(f'{{"{s}", {a:.3g}, {b:.3g}}}' for s, a, b in terms) + "}")

if __name__ == "__main__":
    main()
