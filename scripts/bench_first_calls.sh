#!/usr/bin/env bash
# A job's first 20 calls, one process per scheme (issue 31, item 1: "in a 20-call run (no warm-up) its
# mean time per call is <= 1.10x the best fixed scheme's"). bench_fastpath.sh's 20-call runs time
# every scheme in one process, where the scheme first in round 0 pays the process's warm-up (first
# touches of MPI's shared-memory buffers and of the allocator's pages) for all the others; here each
# scheme starts its own job, as a user's job would, on the same rows as bench_fastpath.sh:
#  - the Brown-corpus embedding gradient, coalesced and as emitted (one row per occurrence);
#  - the demo sizes 1, 4, 16 MB (d = 1 %, overlap 2, skew 1.1);
# n = 2 and 4, sparse and dense output. Per row and repetition: one `zen_perf -n 20 -w 0
# --auto-settle 0` job per fixed scheme, one for auto's first job (nothing remembered) and one for a
# later job (auto.cache from a steady-state job of the row, run once before the repetitions, copied
# afresh for each), in an order rotated by one per repetition. Output: OUT/TAG-rR-NAME.json;
# scripts/first_calls_table.py OUT prints the medians over the repetitions and auto / best.
# The 20-call mean of one job is mostly its first call, and first calls vary from job to job more
# than between schemes (docs/results.md, "One process per scheme"): read the spread column.
#   usage: [ZEN_SCHEMES=a,b,..] [ZEN_NP="2 4"] [ZEN_OUTPUTS="sparse dense"] [ZEN_ROWS="brown brown-occ 1M 4M 16M"]
#          [ZEN_PERF=build/bin/zen_perf] [ZEN_MPIRUN=mpirun] scripts/bench_first_calls.sh [OUT] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/first-calls}
reps=${2:-5}
perf=${ZEN_PERF:-build/bin/zen_perf}
mpirun=${ZEN_MPIRUN:-mpirun}
source scripts/env.sh
mkdir -p "$out"
IFS=, read -r -a fixed <<<"${ZEN_SCHEMES:-balanced,allgather,sparse_ps,sparcml,omnireduce,dense,dense_native,mpi_allreduce,mpi_allgatherv}"
names=("${fixed[@]}" auto auto-later)
case " ${ZEN_ROWS:-brown brown-occ 1M 4M 16M} " in *" brown"*) bash scripts/brown_traces.sh ;; esac
job() {  # NP OUTPUT JSON SCHEME ARGS...: one job of 20 calls
  local np=$1 output=$2 json=$3 scheme=$4
  shift 4
  "$mpirun" -np "$np" "$perf" --scheme "$scheme" -c 1 -n 20 -w 0 --auto-settle 0 --output "$output" \
    --json "$json" "$@" >"${json%.json}.txt" 2>&1 || { cat "${json%.json}.txt"; exit 1; }
}
for np in ${ZEN_NP:-2 4}; do
  for output in ${ZEN_OUTPUTS:-sparse dense}; do
    for row in ${ZEN_ROWS:-brown brown-occ 1M 4M 16M}; do
      case $row in
        brown) args=(--trace data/traces/brown-n8-row) ;;
        brown-occ) args=(--trace data/traces/brown-n8-row-occ) ;;
        *) args=(-b "$row" -e "$row" -d 0.01 --overlap 2 --skew 1.1) ;;
      esac
      tag=$row-n$np-$output
      echo "== $tag"
      # What a long earlier job of the same row remembered: auto settled, then timed.
      rm -f "$out/$tag.cache"
      "$mpirun" -np "$np" "$perf" --scheme auto -c 1 -n 40 -w 3 --output "$output" "${args[@]}" \
        --auto-cache "$out/$tag.cache" >"$out/$tag-remember.txt" 2>&1 || { cat "$out/$tag-remember.txt"; exit 1; }
      for ((r = 1; r <= reps; r++)); do
        for ((i = 0; i < ${#names[@]}; i++)); do
          name=${names[$(((i + r - 1) % ${#names[@]}))]}
          json=$out/$tag-r$r-$name.json
          case $name in
            auto) job "$np" "$output" "$json" auto "${args[@]}" ;;
            auto-later)
              cp "$out/$tag.cache" "$out/$tag-r$r.cache"
              job "$np" "$output" "$json" auto "${args[@]}" --auto-cache "$out/$tag-r$r.cache" ;;
            *) job "$np" "$output" "$json" "$name" "${args[@]}" ;;
          esac
        done
      done
      /usr/bin/python3 scripts/first_calls_table.py "$out" --tag "$tag"
    done
  done
done
/usr/bin/python3 scripts/first_calls_table.py "$out"
