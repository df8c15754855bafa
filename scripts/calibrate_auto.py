#!/usr/bin/env python3
"""Fits the cost model's CPU terms per scheme (seconds per value and per row touched, per dense value) from zen_perf
JSON files of scripts/calibrate_auto.sh: each file times the fixed schemes beside
`auto --explain --auto-cpu none`, whose explanation lists every candidate's link-only prediction and
the rows its compute term charges ("balanced 6.47 ms (19810340 B, 8300000 rows)": the busiest rank's, or where
ranks share cores a machine's rows over its cores). Per scheme, least squares on
relative errors of each row's fastest timed call (min_us: the least disturbed on a shared machine):
measured - predicted = value_s * rows * D + row_s * rows + dense_s * N * F (all >= 0), N counted only where the
scheme touches the dense tensor: a dense result, or a dense scheme (model::dense_values); F the ranks per core
the explanation names ("shared cores: 2 ranks per core"; 1 when absent), since every rank of a machine
touches N. Prints a table (worst
model/measured before and after, the fit's sum of squared relative errors) and the --auto-cpu argument.
   usage: scripts/calibrate_auto.py FILE.json..."""
import json
import re
import sys

DENSE = {"dense", "dense_native"}  # the rows with detail::kDense
PRED = re.compile(r" ([a-z_]+) ([0-9.e+-]+) (ms|us) \((\d+) B, (\d+) rows\)")


def solve(a, b):
    """Solution of the small linear system a x = b (Gaussian elimination), or None when singular."""
    n = len(b)
    m = [list(a[i]) + [b[i]] for i in range(n)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[piv][c]) < 1e-300:
            return None
        m[c], m[piv] = m[piv], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(ps):
    """Non-negative least squares on relative errors of rest = value_s * v + row_s * r + dense_s * N:
    the best of the fits on every subset of the three terms whose coefficients are all >= 0."""
    cols = lambda x: (x[2], x[3], x[4])  # values touched, rows touched, dense values
    best = (sum(((m - p) / m) ** 2 for m, p, *_ in ps), [0.0, 0.0, 0.0])
    for mask in range(1, 8):
        idx = [i for i in range(3) if mask >> i & 1]
        a = [[sum(cols(x)[i] * cols(x)[j] / x[0] ** 2 for x in ps) for j in idx] for i in idx]
        b = [sum(cols(x)[i] * (x[0] - x[1]) / x[0] ** 2 for x in ps) for i in idx]
        sol = solve(a, b)
        if sol is None or min(sol) < 0:
            continue
        coef = [0.0, 0.0, 0.0]
        for i, v in zip(idx, sol):
            coef[i] = v
        err = sum(((x[0] - x[1] - sum(c * f for c, f in zip(coef, cols(x)))) / x[0]) ** 2 for x in ps)
        if err < best[0]:
            best = (err, coef)
    return best[1]


def main():
    pts = {}  # scheme -> [(measured_s, predicted_s, values, rows, dense values)]
    for path in sys.argv[1:]:
        with open(path) as f:
            d = json.load(f)
        dense_out = d["config"]["output"] == "dense"
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
            shared = re.search(r"shared cores: ([0-9.e+-]+) ranks per core", text)
            F = float(shared.group(1)) if shared else 1.0
            for m in PRED.finditer(text.split("model:", 1)[1]):
                scheme, t, unit, _, nrows = m.groups()
                if scheme not in rows:
                    continue
                pred = float(t) * (1e-3 if unit == "ms" else 1e-6)
                meas = rows[scheme]["time_min_us"] * 1e-6
                N = (rows[scheme]["count"] if dense_out or scheme in DENSE else 0) * F
                pts.setdefault(scheme, []).append((meas, pred, int(nrows) * D, int(nrows), N))
    terms = []
    total = 0.0
    print(f"{'scheme':>14} {'ns/value':>9} {'ns/dense':>9} {'ns/row':>7} {'points':>6} {'worst model/measured before':>28} {'after':>8} {'error':>7}")
    for scheme, ps in sorted(pts.items()):
        a, r, b = fit(ps)
        before = [p / m for m, p, *_ in ps]
        after = [(p + a * v + r * k + b * N) / m for m, p, v, k, N in ps]
        worst = lambda xs: max(xs, key=lambda x: max(x, 1 / x) if x > 0 else float("inf"))
        err = sum((1 - x) ** 2 for x in after)  # what the fit minimises: squared relative errors
        total += err
        print(f"{scheme:>14} {a * 1e9:9.3f} {b * 1e9:9.3f} {r * 1e9:7.2f} {len(ps):6d} {worst(before):28.3f} {worst(after):8.3f} {err:7.3f}")
        terms.append((scheme, a, b, r))
    print(f"fit error (sum over the schemes of the squared relative errors): {total:.3f}")
    print("--auto-cpu " + ",".join(f"{s}={a:.3g}/{b:.3g}/{r:.3g}" for s, a, b, r in terms))
    print("C++: {" + ", ".join(f'{{"{s}", {a:.3g}, {b:.3g}, {r:.3g}}}' for s, a, b, r in terms) + "}")


if __name__ == "__main__":
    main()
