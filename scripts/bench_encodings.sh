#!/usr/bin/env bash
# Index coding near the information bound (issue 17): balanced's bytes and time with COO both ways,
# COO push + bitmap pull, and Auto (Elias-Fano where it is smallest), timed in the same rounds, at
# D = 1 f32 on synthetic tensors (d = 0.1 %, 1 %, 3 %, 10 %; n = 4 and 8) and on the Brown-corpus
# gradient with element indices (zen_trace corpus without --row-level, D = 1). sparse_ps likewise on
# the synthetic ones. Columns of interest: sent_B (most bytes a rank sent per call), bound_eff
# (bytes sent / information bound, all ranks), time_us, #wrong.
#   usage: scripts/bench_encodings.sh [OUT] [ITERS] [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/encodings}
iters=${2:-10}
size=${3:-16M}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
elem=data/traces/brown-n8-elem
[ -s "$elem/trace.json" ] || build/bin/zen_trace corpus --text "$text" -o "$elem" -n 8 -B 256 -D 64 -T 4 >/dev/null
variants=balanced:coo/coo,balanced:coo/bitmap,balanced,sparse_ps:coo/coo,sparse_ps
for np in 4 8; do
  for d in 0.001 0.01 0.03 0.1; do
    tag=synthetic-n$np-d$d
    echo "== $tag"
    mpirun -np $np build/bin/zen_perf --scheme $variants -b "$size" -e "$size" -d "$d" -c 1 -w 3 -n "$iters" \
      --json "$out/$tag.json" | tee "$out/$tag.txt" | grep -E "^ +[0-9]|total #wrong"
  done
  tag=brown-elem-n$np
  echo "== $tag"
  mpirun -np $np build/bin/zen_perf --trace "$elem" --scheme $variants -c 1 -w 3 -n "$iters" \
    --json "$out/$tag.json" | tee "$out/$tag.txt" | grep -E "^ +[0-9]|total #wrong"
done
