#!/usr/bin/env bash
# Two builds of zen_perf on bench_fastpath.sh's rows (Brown coalesced and as emitted, demo 1/4/16 MB
# at D = 1; n = 2 and 4; sparse and dense output), the builds alternating row by row and the whole set
# repeated REPS times, so that "before" and "after" a change (issue 30's redesign) see the same
# machine. Each zen_perf run times every scheme and the raw MPI baselines interleaved; compare the
# ratios within a run with scripts/ab_table.py OUT.
#   usage: [ZEN_SCHEMES=a,b,..] scripts/bench_ab.sh OUT ZEN_PERF_A ZEN_PERF_B [ITERS] [REPS]
#   e.g.   git worktree add /tmp/before <rev> && (cd /tmp/before && cmake --preset cpu &&
#          cmake --build build --target zen_perf); scripts/bench_ab.sh bench-out/ab /tmp/before/build/bin/zen_perf build/bin/zen_perf
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n 2,9p "$0" >&2; exit 2; }
out=$1 a=$2 b=$3 iters=${4:-40} reps=${5:-2}
for bin in "$a" "$b"; do [ -x "$bin" ] || { echo "bench_ab.sh: $bin is not an executable" >&2; exit 2; }; done
source scripts/env.sh
bash scripts/brown_traces.sh
# Default: the schemes both sides of issue 30 had (auto and the later baselines may differ by build).
schemes=${ZEN_SCHEMES:-balanced,allgather,sparse_ps,dense,dense_native,mpi_allreduce,mpi_allgatherv}
mkdir -p "$out"
printf 'A %s\nB %s\n' "$(realpath "$a")" "$(realpath "$b")" >"$out/builds.txt"
for rep in $(seq 1 "$reps"); do
  for np in 2 4; do
    for output in sparse dense; do
      for kind in brown demo; do
        if [ "$kind" = brown ]; then
          args=(--trace data/traces/brown-n8-row,data/traces/brown-n8-row-occ -w 5)
        else
          args=(-b 1M -e 16M -f 4 -d 0.01 --overlap 2 --skew 1.1 -w 3)
        fi
        for side in A B; do
          bin=$a; [ $side = B ] && bin=$b
          mkdir -p "$out/$side-r$rep"
          echo "== $side r$rep $kind-n$np-$output"
          mpirun -np $np "$bin" --scheme "$schemes" -c 1 -n "$iters" "${args[@]}" --output $output \
            --json "$out/$side-r$rep/$kind-n$np-$output.json" >"$out/$side-r$rep/$kind-n$np-$output.txt"
        done
      done
    done
  done
done
