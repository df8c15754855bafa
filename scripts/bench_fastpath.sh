#!/usr/bin/env bash
# The fast-path comparison of issue 11: zen's schemes against the raw MPI calls a user would write
# (mpi_allreduce, mpi_allgatherv), medians of one zen_perf run each, on
#  - the Brown-corpus embedding gradient (zen_trace corpus, B = 256, D = 64, row-level), coalesced
#    and uncoalesced (one row per token occurrence) timed in the same rounds, n = 2 and 4;
#  - the synthetic sizes of `ZEN_DEMO=sweep scripts/demo.sh` (1M..16M bytes, d = 1%, overlap 2,
#    skew 1.1), n = 2 and 4;
# both output forms. Every row is run twice: the steady-state run (warm-up, auto settled before
# timing; TAG.json) and the 20-call run with no warm-up (-n 20 -w 0 --auto-settle 0; TAG-m20.json,
# whose mean_us includes auto's decision calls and every scheme's cold first call).
# Output: one zen_perf table + JSON per run under OUT (default bench-out/); scripts/fastpath_table.py
# and scripts/auto_table.py turn them into docs/results.md's tables.
# ZEN_TWINS=NAME#2,.. adds twins: a second instance of a scheme, timed in the same rounds, whose
# ratio to the row's best is the noise floor of the 1.10x bound (scripts/auto_repeat_table.py).
# ZEN_AUTO_CACHE=1: the steady-state run remembers auto's decisions (--auto-cache OUT/TAG.cache),
# and a third run of each row, TAG-m20c.json, is the 20-call run of a later job that starts from them.
#   usage: [ZEN_SCHEMES=a,b,..] [ZEN_TWINS=a#2,..] [ZEN_AUTO_CACHE=1] [ZEN_NP="2 4"] [ZEN_OUTPUTS="sparse dense"] [ZEN_KINDS="brown demo"]
#          scripts/bench_fastpath.sh [OUT] [ITERS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
iters=${2:-40}
source scripts/env.sh
mkdir -p "$out"
bash scripts/brown_traces.sh
schemes=${ZEN_SCHEMES:-balanced,allgather,sparse_ps,sparcml,omnireduce,dense,dense_native,auto,mpi_allreduce,mpi_allgatherv}${ZEN_TWINS:+,$ZEN_TWINS}
run() {  # TAG WARMUP ZEN_PERF_ARGS...: the steady-state run and the 20-call run of one row
  local tag=$1 warm=$2
  shift 2
  echo "== $tag"
  local cache=()
  if [ -n "${ZEN_AUTO_CACHE:-}" ]; then rm -f "$out/$tag.cache"; cache=(--auto-cache "$out/$tag.cache"); fi
  mpirun -np $np build/bin/zen_perf --scheme $schemes -c 1 -n "$iters" -w "$warm" "$@" --output $output "${cache[@]}" \
    --json "$out/$tag.json" | tee "$out/$tag.txt"
  echo "== $tag-m20"
  mpirun -np $np build/bin/zen_perf --scheme $schemes -c 1 "$@" -n 20 -w 0 --auto-settle 0 --output $output \
    --json "$out/$tag-m20.json" | tee "$out/$tag-m20.txt"
  if [ -n "${ZEN_AUTO_CACHE:-}" ]; then  # a later job: auto starts from what the steady-state run remembered
    echo "== $tag-m20c"
    mpirun -np $np build/bin/zen_perf --scheme $schemes -c 1 "$@" -n 20 -w 0 --auto-settle 0 --output $output \
      --auto-cache "$out/$tag.cache" --json "$out/$tag-m20c.json" | tee "$out/$tag-m20c.txt"
  fi
}
for np in ${ZEN_NP:-2 4}; do
  for output in ${ZEN_OUTPUTS:-sparse dense}; do
    for kind in ${ZEN_KINDS:-brown demo}; do
      if [ "$kind" = brown ]; then
        run brown-n$np-$output 5 --trace data/traces/brown-n8-row,data/traces/brown-n8-row-occ
      else
        run demo-n$np-$output 3 -b 1M -e 16M -f 4 -d 0.01 --overlap 2 --skew 1.1
      fi
    done
  done
done
