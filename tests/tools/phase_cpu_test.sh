#!/usr/bin/env bash
# zen_perf --phase-cpu (SchemeOptions::phase_cpu_time): on the loopback backend at n = 1..8, the JSON's
# phases_ranks of balanced and sparse_ps carry every phase with its CPU time, plausible against its
# wall time (the busiest rank's CPU at most its pool's 2 threads x the slowest rank's wall time; all
# ranks together at most n x 2 x that), the ranks' sum at least their busiest, some CPU in all; and
# the same run without --phase-cpu reports no CPU time (the report line is absent too).
#   phase_cpu_test.sh ZEN_PERF PYTHON3
set -euo pipefail
perf=$1 py=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in 1 2 3 4 5 6 7 8; do
  args=(--threads "$n" --cpu-threads 2 -b 1M -e 1M -d 0.05 --row-width 4 --scheme balanced,sparse_ps -n 3 -w 1)
  "$perf" "${args[@]}" --phase-cpu --json "$tmp/on.json" >"$tmp/on.txt"
  "$perf" "${args[@]}" --json "$tmp/off.json" >"$tmp/off.txt"
  grep -q "^#   balanced per phase" "$tmp/on.txt" || { echo "FAIL n=$n: no per-phase lines with --phase-cpu"; cat "$tmp/on.txt"; exit 1; }
  if grep -q "per phase (mean per call" "$tmp/off.txt"; then echo "FAIL n=$n: per-phase CPU lines without --phase-cpu"; exit 1; fi
  "$py" - "$tmp/on.json" "$tmp/off.json" "$n" <<'PY'
import json, sys
on, off, n = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
def fail(msg):
    print("FAIL n=%d: %s" % (n, msg)); sys.exit(1)
for row in on["rows"]:
    ph = row.get("phases_ranks")
    if not ph: fail("%s: no phases_ranks" % row["scheme"])
    names = [p["name"] for p in row["phases_rank0"]]
    if names != [p["name"] for p in ph]: fail("%s: phases_ranks names %s != rank 0's %s" % (row["scheme"], ph, names))
    total = 0
    for p in ph:
        w, cmax, csum = p["wall_max_s"], p["cpu_max_s"], p["cpu_sum_s"]
        if min(w, cmax, csum) < 0: fail("%s %s: negative time %s" % (row["scheme"], p["name"], p))
        if cmax > 2 * w + 1e-4: fail("%s %s: busiest rank's CPU %g s above 2 threads x wall %g s" % (row["scheme"], p["name"], cmax, w))
        if csum > n * (2 * w + 1e-4): fail("%s %s: all ranks' CPU %g s above n x 2 x wall %g s" % (row["scheme"], p["name"], csum, w))
        if csum + 1e-12 < cmax: fail("%s %s: sum %g below max %g" % (row["scheme"], p["name"], csum, cmax))
        total += csum
    if total <= 0: fail("%s: no CPU time in any phase" % row["scheme"])
    if not all(p["cpu_seconds"] >= 0 for p in row["phases_rank0"]): fail("negative rank-0 CPU")
for row in off["rows"]:
    if any(p["cpu_sum_s"] != 0 for p in row.get("phases_ranks", [])): fail("%s: CPU time without --phase-cpu" % row["scheme"])
PY
done
echo "phase_cpu_test: pass"
