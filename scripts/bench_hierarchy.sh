#!/usr/bin/env bash
# hierarchical_sparse against flat balanced (and the dense-inside hier_balanced) on a namespace
# cluster (scripts/cluster.sh) with several ranks per host: the Brown-corpus embedding trace (as
# scripts/bench_cluster.sh: B = 256 sentences per rank, D = 64, row-level), H hosts x K ranks.
#   time:  one zen_perf run per layout and output, the schemes interleaved (median ms per call of the
#          slowest rank);
#   bytes: what crosses the hosts' links, read from every host's eth0 counters (tx + rx bytes, IP and
#          TCP headers included) around two zen_perf runs of one scheme (ITERS and 2 x ITERS calls):
#          the difference over ITERS calls cancels MPI's start-up and zen_perf's own messages.
# Writes OUT/results.md (default bench-out/hierarchy) and every zen_perf output beside it.
#   usage: scripts/bench_hierarchy.sh [OUT] [ITERS]
#   env:   ZEN_BENCH_LAYOUTS="4x2 8x2" ZEN_BENCH_RATE=1gbit ZEN_BENCH_OUTPUTS="dense sparse"
#          ZEN_BENCH_SCHEMES=balanced,hierarchical_sparse (the timed run; hier_balanced, at ~0.7 s per
#          call here, can be added, but its CPU load then slows the calls interleaved with it)
# The cluster gets its own prefix, subnet and state (ZEN_CLUSTER_PREFIX=zhier, 10.231.31, ...) so
# that it never meets another cluster of this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/hierarchy}
iters=${2:-10}
layouts=${ZEN_BENCH_LAYOUTS:-4x2 8x2}
rate=${ZEN_BENCH_RATE:-1gbit}
outputs=${ZEN_BENCH_OUTPUTS:-dense sparse}
schemes=${ZEN_BENCH_SCHEMES:-balanced,hierarchical_sparse}
export ZEN_CLUSTER_PREFIX=${ZEN_CLUSTER_PREFIX:-zhier} ZEN_CLUSTER_SUBNET=${ZEN_CLUSTER_SUBNET:-10.231.31}
export ZEN_CLUSTER_STATE=${ZEN_CLUSTER_STATE:-/run/zen-cluster-hier}
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
trap 'bash scripts/cluster.sh down >/dev/null 2>&1' EXIT

trace_for() {  # ranks -> trace directory
  local t=data/traces/brown-n$1-row
  [ -s "$t/trace.json" ] || build/bin/zen_trace corpus --text "$text" -o "$t" -n "$1" -B 256 -D 64 -T 4 --row-level >/dev/null
  echo "$t"
}
link_bytes() {  # hosts -> tx + rx bytes of every host's eth0, one line per host
  local i
  for i in $(seq 0 $(($1 - 1))); do
    ip netns exec "$ZEN_CLUSTER_PREFIX-h$i" sh -c 'echo $(( $(cat /sys/class/net/eth0/statistics/tx_bytes) + $(cat /sys/class/net/eth0/statistics/rx_bytes) ))'
  done
}
# Bytes per call through the busiest host's link for one scheme (max over hosts of (tx + rx) / 2:
# each direction alike for these symmetric exchanges; both printed in the .bytes file).
host_bytes() {  # hosts trace output scheme -> bytes per call
  local h=$1 trace=$2 output=$3 scheme=$4 a b c k
  local -a x y z
  mapfile -t x < <(link_bytes "$h")
  bash scripts/cluster.sh run -- build/bin/zen_perf --trace "$trace" --scheme "$scheme" --output "$output" \
    -n "$iters" -w 1 -c 0 >/dev/null 2>&1
  mapfile -t y < <(link_bytes "$h")
  bash scripts/cluster.sh run -- build/bin/zen_perf --trace "$trace" --scheme "$scheme" --output "$output" \
    -n $((2 * iters)) -w 1 -c 0 >/dev/null 2>&1
  mapfile -t z < <(link_bytes "$h")
  local best=0
  for k in $(seq 0 $((h - 1))); do
    a=$(( y[k] - x[k] )); b=$(( z[k] - y[k] ))
    c=$(( (b - a) / iters / 2 ))
    echo "h$k $scheme $output: run of $iters calls $a B, of $((2 * iters)) calls $b B -> $c B per call each way" >&2
    (( c > best )) && best=$c
  done
  echo "$best"
}

{
  echo "# hierarchical_sparse on a namespace cluster: Brown trace (D = 64, f32), $rate links"
  echo
  echo "Command: \`scripts/bench_hierarchy.sh $out $iters\` (ZEN_BENCH_LAYOUTS=\"$layouts\", $(date -u +%Y-%m-%d), $(nproc) cores)."
  echo "time: median ms per call of the slowest rank, schemes interleaved in one zen_perf run;"
  echo "host link: bytes per call through the busiest host's link, each way (eth0 counters, headers included)."
} >"$out/results.md"
for layout in $layouts; do
  h=${layout%x*}; k=${layout#*x}
  trace=$(trace_for $((h * k)))
  bash scripts/cluster.sh up "$h" --rate "$rate" --ranks-per-host "$k"
  for output in $outputs; do
    f="$out/$rate-$layout-$output"
    echo "== $layout, $output output"
    bash scripts/cluster.sh run -- build/bin/zen_perf --trace "$trace" --scheme "$schemes" \
      --node-size host --output "$output" -n "$iters" -w 2 -c 1 --json "$f.json" >"$f.txt" 2>&1 || { cat "$f.txt"; exit 1; }
    grep -E "^ +[0-9]|total #wrong|bytes on rank 0" "$f.txt"
    hb=$(host_bytes "$h" "$trace" "$output" balanced 2>>"$f.bytes")
    hs=$(host_bytes "$h" "$trace" "$output" hierarchical_sparse 2>>"$f.bytes")
    echo "host link per call: balanced $hb B, hierarchical_sparse $hs B" | tee -a "$f.bytes"
    {
      echo
      echo "## $h hosts x $k ranks, $output output"
      echo
      echo '```'
      grep -E "^#? *size|^ +[0-9]|total #wrong|bytes on rank 0" "$f.txt"
      echo '```'
      echo
      echo "per-phase ms on rank 0 (mean over the timed calls):"
      /usr/bin/python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print("- " + r["scheme"] + ": " + ", ".join("%s %.1f" % (p["name"], p["seconds"] * 1e3) for p in r.get("phases_rank0", [])))' "$f.json"
      echo
      echo "host link per call (busiest host, each way): balanced $hb B, hierarchical_sparse $hs B," \
        "ratio $(awk -v a="$hs" -v b="$hb" 'BEGIN { printf "%.2f", b ? a / b : 0 }')"
    } >>"$out/results.md"
  done
done
bash scripts/cluster.sh down >/dev/null
echo "wrote $out/results.md"
