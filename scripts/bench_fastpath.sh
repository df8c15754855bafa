#!/usr/bin/env bash
# The fast-path comparison of issue 11: zen's schemes against the raw MPI calls a user would write
# (mpi_allreduce, mpi_allgatherv), medians of one zen_perf run each, on
#  - the Brown-corpus embedding gradient (zen_trace corpus, B = 256, D = 64, row-level), coalesced
#    and uncoalesced (one row per token occurrence) timed in the same rounds, n = 2 and 4;
#  - the synthetic sizes of `ZEN_DEMO=sweep scripts/demo.sh` (1M..16M bytes, d = 1%, overlap 2,
#    skew 1.1), n = 2 and 4;
# both output forms. Output: one zen_perf table + JSON per run under OUT (default bench-out/).
#   usage: [ZEN_SCHEMES=a,b,..] scripts/bench_fastpath.sh [OUT] [ITERS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
iters=${2:-40}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
for form in row row-occ; do
  dir=data/traces/brown-n8-$form
  if [ ! -s "$dir/trace.json" ]; then
    extra=""
    [ "$form" = row-occ ] && extra="--occurrences"
    build/bin/zen_trace corpus --text "$text" -o "$dir" -n 8 -B 256 -D 64 -T 4 --row-level $extra >/dev/null
  fi
done
schemes=${ZEN_SCHEMES:-balanced,allgather,sparse_ps,dense,dense_native,mpi_allreduce,mpi_allgatherv}
for np in 2 4; do
  for output in sparse dense; do
    tag=brown-n$np-$output
    echo "== $tag"
    mpirun -np $np build/bin/zen_perf --trace data/traces/brown-n8-row,data/traces/brown-n8-row-occ \
      --scheme $schemes -c 1 -w 5 -n "$iters" --output $output --json "$out/$tag.json" | tee "$out/$tag.txt"
    tag=demo-n$np-$output
    echo "== $tag"
    mpirun -np $np build/bin/zen_perf --scheme $schemes -b 1M -e 16M -f 4 -d 0.01 --overlap 2 --skew 1.1 \
      -c 1 -w 3 -n "$iters" --output $output --json "$out/$tag.json" | tee "$out/$tag.txt"
  done
done
