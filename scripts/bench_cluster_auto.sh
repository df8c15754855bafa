#!/usr/bin/env bash
# `auto` against everything a user could run, on the namespace cluster (issue 31, item 1; the
# shared-memory rows are scripts/bench_fastpath.sh's): the Brown-corpus trace of bench_cluster.sh
# (B = 256 sentences per rank, D = 64, row-level) on H hosts x K ranks per host, at each link rate,
# dense and sparse output. Per row two zen_perf runs of every zen scheme, auto and the raw MPI
# baselines (plus hier_balanced where K > 1, nodes = hosts):
#   <rate>-<H>x<K>-<output>.json       steady state: ITERS timed calls after 3 warm-up rounds, auto
#                                      settled before timing;
#   <rate>-<H>x<K>-<output>-m20.json   a job's first 20 calls (-n 20 -w 0 --auto-settle 0): every
#                                      scheme's cold first call and auto's decision calls included.
# Then: scripts/auto_table.py --cluster OUT (the table of docs/results.md).
#   usage: [ZEN_BENCH_LAYOUTS="2x1 4x1 8x1 4x2"] [ZEN_BENCH_RATES="1gbit 10gbit"]
#          [ZEN_BENCH_OUTPUTS="dense sparse"] scripts/bench_cluster_auto.sh [OUT] [ITERS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/cluster-auto}
iters=${2:-15}
layouts=${ZEN_BENCH_LAYOUTS:-2x1 4x1 8x1 4x2}
rates=${ZEN_BENCH_RATES:-1gbit 10gbit}
outputs=${ZEN_BENCH_OUTPUTS:-dense sparse}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
trap 'bash scripts/cluster.sh down >/dev/null 2>&1' EXIT
for rate in $rates; do
  for layout in $layouts; do
    h=${layout%x*}
    k=${layout#*x}
    n=$((h * k))
    tr_ranks=8
    ((n > 8)) && tr_ranks=16
    trace=data/traces/brown-n$tr_ranks-row
    [ -s "$trace/trace.json" ] ||
      build/bin/zen_trace corpus --text "$text" -o "$trace" -n $tr_ranks -B 256 -D 64 -T 4 --row-level >/dev/null
    extra=()
    schemes=all
    if ((k > 1)); then
      extra=(--node-size host)
      schemes=all,hier_balanced
    fi
    bash scripts/cluster.sh up "$h" --rate "$rate" --ranks-per-host "$k"
    for output in $outputs; do
      f="$out/$rate-$layout-$output"
      echo "== $rate, $h hosts x $k ranks, $output output"
      bash scripts/cluster.sh run -np "$n" -- build/bin/zen_perf --trace "$trace" --scheme "$schemes" "${extra[@]}" \
        --output "$output" -n "$iters" -w 3 -c 1 --json "$f.json" >"$f.txt" 2>&1 || { cat "$f.txt"; exit 1; }
      grep -E "^ +[0-9]|total #wrong|auto " "$f.txt" || true
      echo "== $rate, $h hosts x $k ranks, $output output, first 20 calls"
      bash scripts/cluster.sh run -np "$n" -- build/bin/zen_perf --trace "$trace" --scheme "$schemes" "${extra[@]}" \
        --output "$output" -n 20 -w 0 --auto-settle 0 -c 1 --json "$f-m20.json" >"$f-m20.txt" 2>&1 ||
        { cat "$f-m20.txt"; exit 1; }
      grep -E "total #wrong|auto " "$f-m20.txt" || true
    done
    bash scripts/cluster.sh down >/dev/null
  done
done
