#!/usr/bin/env bash
# The cost model's bytes equal zen_perf's measured bytes exactly: a synthetic trace and the corpus
# trace of tests/data, n = 2..8 (loopback ranks), every scheme, sparse and dense output, three pull
# encodings across the runs. zen_model --check exits non-zero on any difference. Then the time model's
# round trip: --calibrate --save on a synthetic run at n = 4 (compute per row from the n = 8 sparse trace
# run: --compute-from), --predict of the n = 8 trace runs (every
# calibrated scheme's row predicted, the model's parts summing to its time).
#   model_check_test.sh ZEN_TRACE ZEN_PERF ZEN_MODEL CORPUS_TEXT
set -uo pipefail
zen_trace=$1 zen_perf=$2 zen_model=$3 text=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$zen_trace" synthetic -o "$dir/syn" -N 50021 -n 8 -T 3 -d 0.03 -g 3 -s 1.1 >/dev/null || exit 1
"$zen_trace" corpus --text "$text" -o "$dir/corpus" -n 8 -B 8 -D 16 -T 2 --row-level >/dev/null || exit 1
schemes=balanced,allgather,sparcml,omnireduce,sparse_ps,dense,dense_native
fail=0 runs=0
pulls=(auto coo bitmap)
for n in 2 3 4 5 6 7 8; do
  for output in sparse dense; do
    pull=${pulls[$(( (n + ${#output}) % 3 ))]}
    json=$dir/perf-$n-$output.json
    if ! "$zen_perf" --threads "$n" --trace "$dir/syn,$dir/corpus" --scheme $schemes --output $output --pull $pull \
         -c 1 -w 1 -n 4 --seed $((40 + n)) --json "$json" >"$dir/perf.txt" 2>&1; then
      echo "zen_perf failed (n=$n, $output):"; cat "$dir/perf.txt"; fail=1; continue
    fi
    if ! "$zen_model" --trace "$dir/syn,$dir/corpus" --check "$json" >"$dir/check.txt" 2>&1; then
      echo "MISMATCH n=$n output=$output pull=$pull:"; cat "$dir/check.txt"; fail=1
    fi
    runs=$((runs + 1))
    tail -n 1 "$dir/check.txt" | sed "s/^/n=$n $output pull=$pull: /"
  done
done
echo "model_check: $runs runs, $( [ $fail = 0 ] && echo all exact || echo FAILED )"

if ! "$zen_perf" --threads 4 --scheme dense_native,balanced,allgather,sparse_ps -b 64K -e 1M -f 4 -d 0.01 -c 0 -w 1 -n 3 \
     --json "$dir/cal-run.json" >"$dir/cal-run.txt" 2>&1 ||
   ! "$zen_model" --calibrate "$dir/cal-run.json" --compute-from "$dir/perf-8-sparse.json" --save "$dir/cal.json" \
     >"$dir/cal.txt" 2>&1 || ! grep -q "compute per row from" "$dir/cal.txt"; then
  echo "calibration failed:"; cat "$dir/cal-run.txt" "$dir/cal.txt"; exit 1
fi
for output in sparse dense; do
  if ! "$zen_model" --trace "$dir/syn,$dir/corpus" --predict "$dir/perf-8-$output.json" --calibration "$dir/cal.json" \
       >"$dir/pred.txt" 2>&1; then
    echo "predict failed ($output):"; cat "$dir/pred.txt"; exit 1
  fi
  # 4 calibrated schemes x 2 traces; alpha + beta + compute = model (to the printed 0.1 us).
  if ! awk '/^ +(balanced|allgather|sparse_ps|dense_native) / { rows++; if (($4 + $5 + $6) - $7 > 0.25 || $7 - ($4 + $5 + $6) > 0.25 || $7 <= 0) bad++ }
            END { exit !(rows == 8 && bad == 0) }' "$dir/pred.txt"; then
    echo "predict ($output): expected 8 consistent rows:"; cat "$dir/pred.txt"; exit 1
  fi
  echo "predict n=8 $output: $(tail -n 1 "$dir/pred.txt")"
done
exit $fail
