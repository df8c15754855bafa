#!/usr/bin/env bash
# Where the time of `balanced` goes on the namespace cluster (scripts/cluster.sh; issue 31, item 3):
# the Brown trace (as scripts/bench_cluster.sh: B = 256, D = 64, row-level, the first n ranks'
# records), one rank per host, per (rate, hosts, output):
#   - the call time against its link-rate bound (max(sent, recv) bytes of the busiest rank at the line
#     rate), from a plain zen_perf run of ITERS timed calls;
#   - per phase, from a second run with --phase-cpu (ITERS_PHASES calls): the slowest rank's wall time,
#     the time the busiest rank's bytes of the phase take at the line rate, and the CPU time (thread CPU
#     clocks: user and system) of the busiest rank and of all ranks together. The CPU of the exchange
#     phases (counts, push, meta, pull) is the kernel's TCP work done in the ranks' system calls, MPI's
#     progress and the ranks' waiting (they yield the core in a loop: scripts/cluster.sh); that of the
#     others (hash, encode, aggregate, decode) is zen's own work.
#   - push + pull: the wall time of the two transfers alone, and bound / (push + pull): the fraction of
#     the bound the call would reach if every other phase were hidden behind them (a perfect overlap of
#     the CPU stages with the wire that leaves the transfers as they are).
# Writes under OUT (default bench-out/wire-cpu): <rate>-h<n>-<output>{,-phases}.{txt,json}, results.md.
#   usage: scripts/bench_wire_cpu.sh [OUT]   env: ZEN_BENCH_HOSTS="4 8" ZEN_BENCH_RATES="1gbit 10gbit"
#          ZEN_BENCH_OUTPUTS="dense sparse" ITERS=40 ITERS_PHASES=20
#          ZEN_BENCH_MPI_ARGS="--mca NAME VALUE ..." (mpirun options for both runs, e.g. Open MPI's TCP eager limit)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/wire-cpu}
hosts=${ZEN_BENCH_HOSTS:-4 8}
rates=${ZEN_BENCH_RATES:-1gbit 10gbit}
outputs=${ZEN_BENCH_OUTPUTS:-dense sparse}
iters=${ITERS:-40}
ph=${ITERS_PHASES:-20}
read -r -a mpi_args <<<"${ZEN_BENCH_MPI_ARGS:-}"
source scripts/env.sh
mkdir -p "$out"
text=$(bash scripts/fetch_corpus.sh)
brown=data/traces/brown-n8-row
[ -s "$brown/trace.json" ] || build/bin/zen_trace corpus --text "$text" -o "$brown" -n 8 -B 256 -D 64 -T 4 --row-level >/dev/null
trap 'bash scripts/cluster.sh down >/dev/null 2>&1' EXIT

perf() {  # FILE ITERS [extra zen_perf options]
  local f=$1 n=$2
  shift 2
  bash scripts/cluster.sh run -- "${mpi_args[@]}" build/bin/zen_perf --trace "$brown" --scheme balanced --output "$output" \
    -n "$n" -w 3 -c 1 --json "$f.json" "$@" >"$f.txt" 2>&1 || { cat "$f.txt"; exit 1; }
}

for rate in $rates; do
  for h in $hosts; do
    bash scripts/cluster.sh up "$h" --rate "$rate" >/dev/null
    for output in $outputs; do
      f="$out/$rate-h$h-$output"
      echo "== $rate, $h hosts, $output output"
      d0=$(bash scripts/cluster.sh drops)
      perf "$f" "$iters"
      echo "$(( $(bash scripts/cluster.sh drops) - d0 ))" >"$f.drops"
      perf "$f-phases" "$ph" --phase-cpu
      grep -E "^ +[0-9]|total #wrong" "$f.txt" "$f-phases.txt"
    done
  done
done
bash scripts/cluster.sh down >/dev/null

rate_bits() { case $1 in *gbit) echo $(( ${1%gbit} * 1000000000 )) ;; *mbit) echo $(( ${1%mbit} * 1000000 )) ;; esac; }
{
  echo "# balanced on the namespace cluster: wire against CPU (Brown trace, D = 64, one rank per host)"
  echo
  echo "Command: \`${ZEN_BENCH_MPI_ARGS:+ZEN_BENCH_MPI_ARGS=\"$ZEN_BENCH_MPI_ARGS\" }scripts/bench_wire_cpu.sh $out\` ($(date -u +%Y-%m-%d), $(nproc) cores; ITERS=$iters ITERS_PHASES=$ph)."
  echo
  echo "time: median ms per call of the slowest rank ($iters timed calls; mean: their mean); bound: max(sent, recv) bytes of the"
  echo "busiest rank at the line rate; tbf drops: packets the links' queues dropped during those calls (scripts/cluster.sh"
  echo "drops); push + pull: the two transfers' wall time (slowest rank, mean over calls; --phase-cpu run); if hidden: bound /"
  echo "(push + pull), the fraction of the bound with every other phase hidden behind the transfers; other: the wall time"
  echo "of the other phases; CPU, all ranks, per call: zen's work (hash, encode, aggregate, decode) and the exchange"
  echo "phases' (counts, push, meta, pull: kernel TCP in the ranks' system calls, MPI progress, waiting)."
  echo
  echo "| rate | hosts | output | wire MB | bound ms | time ms | of bound | mean ms | #wrong | tbf drops | push + pull ms | if hidden | other ms | CPU ms: work | CPU ms: exchange |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for rate in $rates; do
    bits=$(rate_bits "$rate")
    for h in $hosts; do
      for output in $outputs; do
        f="$out/$rate-h$h-$output"
        awk -v bits="$bits" -v rate="$rate" -v h="$h" -v o="$output" '
          FILENAME ~ /\.drops$/ { drops = $1 }
          FILENAME !~ /-phases\.txt$/ && /^ +[0-9]/ && $4 == "balanced" { t = $6; mean = $16; b = ($11 > $12 ? $11 : $12) }
          FILENAME !~ /-phases\.txt$/ && /total #wrong/ { wrong = $NF }
          FILENAME ~ /-phases\.txt$/ && /^#     [a-z]/ && / wall / {
            if ($2 == "push" || $2 == "pull") xfer += $4; else other += $4
            if ($2 == "counts" || $2 == "push" || $2 == "meta" || $2 == "pull") cx += $10; else cw += $10 }
          END {
            bound = b * 8 / bits * 1e3
            printf "| %s | %d | %s | %.2f | %.1f | %.1f | %.0f %% | %.1f | %s | %s | %.1f | %.0f %% | %.1f | %.1f | %.1f |\n",
              rate, h, o, b / 1e6, bound, t / 1000, 100 * bound / (t / 1000), mean / 1000, wrong, drops, xfer, 100 * bound / xfer, other, cw, cx
          }' "$f.drops" "$f.txt" "$f-phases.txt"
      done
    done
  done
  echo
  echo "Per phase (the --phase-cpu run, mean per call): wall: slowest rank; wire: the busiest rank's max(sent, recv)"
  echo "bytes of the phase at the line rate; CPU: the busiest rank / all ranks together."
  for rate in $rates; do
    bits=$(rate_bits "$rate")
    for h in $hosts; do
      for output in $outputs; do
        f="$out/$rate-h$h-$output-phases.txt"
        echo
        echo "$rate, $h hosts, $output output ($(awk '/^ +[0-9]/ && $4 == "balanced" { printf "%.1f ms per call", $6 / 1000 }' "$f")):"
        echo
        echo "| phase | wall ms | wire ms | CPU ms (busiest rank) | CPU ms (all ranks) |"
        echo "|---|---:|---:|---:|---:|"
        awk -v bits="$bits" '/^#     [a-z(]/ && /wall/ {
            bytes = (/bytes/ ? $NF : 0)
            printf "| %s | %.2f | %s | %.2f | %.2f |\n", $2, $4, (/bytes/ ? sprintf("%.2f", bytes * 8 / bits * 1e3) : "-"), $7, $10 }' "$f"
      done
    done
  done
} >"$out/results.md"
cat "$out/results.md"
