#!/usr/bin/env bash
# Calibrates the cost model's CPU terms per scheme on this machine (docs/cost-model.md, "CPU
# terms"): zen_perf times every fixed scheme beside `auto --explain --auto-cpu none` (whose
# explanation prints each candidate's link-only prediction and the rows it touches) on
#  - the synthetic sizes of scripts/bench_fastpath.sh (1M..16M, d = 1 %), n = 2 and 4, sparse and dense output;
#  - the Brown-corpus trace (D = 64, coalesced and as emitted), n = 2 and 4, sparse and dense output;
#  - 16M at d = 50 % (the CPU-bound regime), n = 4, sparse output;
# then scripts/calibrate_auto.py fits seconds per value touched per scheme and prints them as
# zen_perf's --auto-cpu argument (and the C++ initializer of SchemeOptions::Auto's defaults).
#   usage: scripts/calibrate_auto.sh [OUT]   (about 1.5 minutes on 2 cores; run it under `quiet`)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/calibrate}
source scripts/env.sh
mkdir -p "$out"
bash scripts/brown_traces.sh
fixed=balanced,allgather,sparse_ps,sparcml,omnireduce,dense_native
common=(--scheme $fixed,auto --explain --auto-cpu none --auto-sample-rows 100000000 -c 0 -w 2 -n 8)  # exact statistics: every candidate predicted
for np in 2 4; do
  for output in sparse dense; do
    mpirun -np $np build/bin/zen_perf "${common[@]}" -b 1M -e 16M -f 4 -d 0.01 --overlap 2 --skew 1.1 --output $output \
      --json "$out/demo-n$np-$output.json" >"$out/demo-n$np-$output.txt"
    mpirun -np $np build/bin/zen_perf "${common[@]}" --trace data/traces/brown-n8-row,data/traces/brown-n8-row-occ \
      --output $output --json "$out/brown-n$np-$output.json" >"$out/brown-n$np-$output.txt"
  done
done
mpirun -np 4 build/bin/zen_perf "${common[@]}" -b 16M -e 16M -d 0.5 --overlap 2 --output sparse \
  --json "$out/d50-n4-sparse.json" >"$out/d50-n4-sparse.txt"
/usr/bin/python3 scripts/calibrate_auto.py "$out"/*.json
