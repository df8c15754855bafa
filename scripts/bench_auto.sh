#!/usr/bin/env bash
# The cost model and scheme `auto` on this machine (docs/cost-model.md), under mpirun:
#  1. model bytes against zen_perf's measured bytes on the Brown-corpus trace, n = 4 and 8;
#  2. the scaling table / CSV / PNG for n = 2..1024 at 25 and 100 Gb/s (model, from the trace);
#  3. the calibration of alpha and beta from a zen_perf run of the dense schemes;
#  4. `auto` against every fixed scheme in the same zen_perf runs: the Brown trace (n = 4) and three
#     synthetic regimes: no overlap (gamma = n), full overlap (gamma = 1) and dense (d = 60 %).
# Output under OUT (default bench-out/auto): the zen_perf tables and JSON, model tables, plot.
#   usage: scripts/bench_auto.sh [OUT] [ITERS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/auto}
iters=${2:-40}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
brown=data/traces/brown-n8-row
[ -s "$brown/trace.json" ] || build/bin/zen_trace corpus --text "$text" -o "$brown" -n 8 -B 256 -D 64 -T 4 --row-level >/dev/null
fixed=balanced,allgather,sparcml,sparse_ps,omnireduce,dense_native

echo "== 1. model bytes vs zen_perf (Brown trace)"
for np in 4 8; do
  mpirun -np $np build/bin/zen_perf --trace $brown --scheme $fixed,dense --output sparse -c 1 -w 2 -n 8 \
    --json "$out/check-n$np.json" >"$out/check-n$np-perf.txt"
  build/bin/zen_model --trace $brown --check "$out/check-n$np.json" | tee "$out/check-n$np.txt"
done

echo "== 2. scaling (model)"
build/bin/zen_model --trace $brown --n 2,4,8,16,32,64,128,256,512,1024 --gbps 25,100 \
  --csv "$out/brown-scaling.csv" --png "$out/brown-scaling.png" | tee "$out/brown-scaling.txt"

echo "== 3. calibration"
mpirun -np 4 build/bin/zen_perf --scheme mpi_allreduce,dense_native,balanced,allgather,sparse_ps -b 256K -e 64M -f 4 \
  -d 0.01 --overlap 2 -c 0 -w 2 -n 10 --json "$out/calib.json" >"$out/calib-perf.txt"
build/bin/zen_model --calibrate "$out/calib.json" | tee "$out/calib.txt"

echo "== 4. auto against the fixed schemes (n = 4)"
mpirun -np 4 build/bin/zen_perf --trace $brown --scheme $fixed,auto --output sparse -c 1 -w 12 -n "$iters" --explain \
  --json "$out/auto-brown.json" | tee "$out/auto-brown.txt"
for regime in "no-overlap --overlap 4 -d 0.01" "full-overlap --overlap 1 -d 0.01" "dense --overlap 2 -d 0.6"; do
  set -- $regime
  tag=$1
  shift
  mpirun -np 4 build/bin/zen_perf --scheme $fixed,auto -b 16M -e 16M "$@" --output sparse -c 1 -w 12 -n "$iters" --explain \
    --json "$out/auto-$tag.json" | tee "$out/auto-$tag.txt"
done
