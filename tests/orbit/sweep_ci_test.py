#!/usr/bin/env python3
"""The CI grid of `zen_orbit sweep` (48 points, real Fashion-MNIST training) and the invariants of its CSV.

    sweep_ci_test.py ZEN_ORBIT [FMNIST_DIR]

Grid: planes 1, 3 x satellites per plane 1, 2, 8 at 1000 km (Walker star, 90 deg) x the first 1 and 3
stations of tests/data/ground-stations x baseline, fedprox, fedbuff, ring; 3 rounds, 300 images per
satellite, first C = 10 idle satellites in contact. Checks:
  * one row per point, ok except the rings of two satellites (their chord passes through the Earth);
  * exact transfer counts: baseline / fedprox 2 min(C, K) server transfers per round, ring 2 P server
    and 2 (S - 1) P ISL transfers per round, fedbuff 2 per buffered delta (buffer min(10, C, K));
  * staleness: 0 for the synchronous schemes, 0 <= mean <= max for fedbuff, and 0 when one satellite
    trains at a time (a freed slot waits for the server's update);
  * monotone in the ground network: with every satellite taking part (K <= C) the baseline's rounds end
    no later with 3 stations than with 1 (a superset of windows), and it trains the same model
    (equal final accuracy): the stations change the timing, not the learning; the ring equals it;
  * learning: every point whose rounds average >= 6 clients ends at or above the accuracy of its own
    first round (single-satellite points overfit their 300-image shard and are exempt);
  * resumable: a rerun skips every point; --dry-run prints the grid size and an estimate.
Exit 77 (skip) without the Debian data set; 1 then too when ZEN_REQUIRE_TEST_INPUTS is set (CI installs it).
"""
import csv
import os
import subprocess
import sys
import tempfile

zen_orbit = sys.argv[1]
data = sys.argv[2] if len(sys.argv) > 2 else "/usr/share/datasets/fashion-mnist"
if not os.path.exists(os.path.join(data, "train-images-idx3-ubyte.gz")):
    if os.environ.get("ZEN_REQUIRE_TEST_INPUTS", "") not in ("", "0"):
        print("sweep_ci_test: FAILED, no Fashion-MNIST in", data,
              "(Debian dataset-fashion-mnist; ZEN_REQUIRE_TEST_INPUTS is set: a missing input is a failure)")
        sys.exit(1)
    print("sweep_ci_test: SKIP, no Fashion-MNIST in", data)
    sys.exit(77)

GRID = ["--planes", "1,3", "--sats-per-plane", "1,2,8", "--altitude-km", "1000", "--stations", "1,3",
        "--schemes", "baseline,fedprox,fedbuff,ring", "--rounds", "3", "--samples-per-sat", "300",
        "--test-limit", "1000", "--clients-per-round", "10", "--data-dir", data, "--jobs", "2"]
C, R = 10, 3
failures = []


def with_flag(flag, value):
    g = list(GRID)
    g[g.index(flag) + 1] = value
    return g


def check(ok, what):
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as out:
    run = subprocess.run([zen_orbit, "sweep", *GRID, "--out", out], capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout, run.stderr)
        sys.exit("sweep failed")
    rows = list(csv.DictReader(open(os.path.join(out, "sweep.csv"))))
    check(len(rows) == 48 and len({r["key"] for r in rows}) == 48, f"{len(rows)} rows, expected 48 distinct points")
    for f in ("heatmap.png", "speedup.png"):
        check(os.path.getsize(os.path.join(out, f)) > 1000, f"{f} missing")
    by = {}
    for r in rows:
        P, S, K = int(r["planes"]), int(r["sats_per_plane"]), int(r["satellites"])
        scheme, name = r["scheme"], r["key"]
        by[(P, S, r["stations"], scheme)] = r
        if scheme == "ring" and S == 2:
            check(r["status"].startswith("error") and "blocked by the Earth" in r["status"], f"{name}: {r['status']}")
            continue
        check(r["status"] == "ok", f"{name}: {r['status']}")
        if r["status"] != "ok":
            continue
        ps, isl = float(r["server_transfers"]), float(r["isl_transfers"])
        smean, smax = float(r["staleness_mean"]), int(r["staleness_max"])
        if scheme in ("baseline", "fedprox"):
            check(ps == R * 2 * min(C, K) and isl == 0, f"{name}: {ps} server / {isl} ISL transfers")
        elif scheme == "ring":
            check(ps == R * 2 * P and isl == R * 2 * (S - 1) * P, f"{name}: {ps} server / {isl} ISL transfers")
        elif scheme == "fedbuff":
            check(ps == 2 * R * min(10, C, K) and isl == 0, f"{name}: {ps} server transfers")
        if scheme == "fedbuff":
            check(0 <= smean <= smax, f"{name}: staleness mean {smean} max {smax}")
            if K == 1:
                check(smax == 0, f"{name}: one satellite cannot be stale, max {smax}")
        else:
            check(smean == 0 and smax == 0, f"{name}: synchronous scheme with staleness {smean}/{smax}")
        clients = min(C, K)
        if clients >= 6:
            check(float(r["final_accuracy"]) >= float(r["first_accuracy"]),
                  f"{name}: final accuracy {r['final_accuracy']} below round 1's {r['first_accuracy']}")
        check(0 <= float(r["idle_fraction"]) <= 1, f"{name}: idle fraction {r['idle_fraction']}")
    for P in (1, 3):
        for S in (1, 2, 8):
            if P * S > C:
                continue
            one, three = by[(P, S, "1", "baseline")], by[(P, S, "3", "baseline")]
            check(float(three["sim_time_s"]) <= float(one["sim_time_s"]),
                  f"P={P} S={S}: 3 stations {three['sim_time_s']} s > 1 station {one['sim_time_s']} s")
            check(three["final_accuracy"] == one["final_accuracy"],
                  f"P={P} S={S}: the stations changed the model ({one['final_accuracy']} vs {three['final_accuracy']})")
            ring = by[(P, S, "1", "ring")]
            if ring["status"] == "ok":
                check(abs(float(ring["final_accuracy"]) - float(one["final_accuracy"])) <= 0.002,
                      f"P={P} S={S}: ring {ring['final_accuracy']} vs baseline {one['final_accuracy']}")
    # Resumable: the rerun runs nothing and leaves the rows as they are.
    before = open(os.path.join(out, "sweep.csv")).read()
    again = subprocess.run([zen_orbit, "sweep", *GRID, "--out", out, "--no-plots"], capture_output=True, text=True)
    check(again.returncode == 0 and "48 already in" in again.stdout and "ran 0 points" in again.stdout,
          "rerun did not skip the finished points: " + again.stdout[-300:])
    check(open(os.path.join(out, "sweep.csv")).read() == before, "rerun changed the CSV")
    dry = subprocess.run([zen_orbit, "sweep", *with_flag("--planes", "1,2,3"), "--out", out, "--dry-run"],
                         capture_output=True, text=True)
    check(dry.returncode == 0 and "72 points" in dry.stdout and "24 to run" in dry.stdout and
          "estimated run time" in dry.stdout, "dry run: " + dry.stdout[-300:])
    # Another setting on the same CSV is refused (its rows would not be comparable).
    other = subprocess.run([zen_orbit, "sweep", *with_flag("--rounds", "4"), "--out", out], capture_output=True, text=True)
    check(other.returncode != 0 and "other settings" in other.stderr, "a changed setting was not refused")

for f in failures:
    print("FAIL:", f)
print(f"sweep_ci_test: 48 points, {len(failures)} failed checks")
sys.exit(1 if failures else 0)
