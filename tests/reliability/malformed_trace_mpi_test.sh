#!/usr/bin/env bash
# Every kind of malformed per-rank trace record ends a zen_perf job under mpirun at once: the rank
# that reads it prints the error (naming itself and the file or the bad index) and the job exits
# non-zero within 10 s at n = 2..5 (no rank waits out a timeout).
#   malformed_trace_mpi_test.sh MPIEXEC ZEN_TRACE ZEN_PERF
set -uo pipefail
mpiexec=$1
zen_trace=$2
zen_perf=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$zen_trace" synthetic -o "$dir/good" -N 10000 -n 5 -T 2 -d 0.02 >/dev/null || exit 1
fail=0
corrupt() {  # corrupt KIND DIR: break rank 1's record of iteration 0
  local f=$2/r1_t0
  case $1 in
    short_values) truncate -s -4 "$f.val" ;;
    missing_index) rm -f "$f.idx" ;;
    index_too_large) printf '\377\377\377\177\000\000\000\000' | dd of="$f.idx" bs=1 seek=8 conv=notrunc status=none ;;
    negative_index) printf '\375\377\377\377\377\377\377\377' | dd of="$f.idx" bs=1 seek=0 conv=notrunc status=none ;;
    truncated_index) truncate -s -3 "$f.idx" ;;
  esac
}
declare -A needle=([short_values]="r1_t0.val" [missing_index]="r1_t0.idx" [index_too_large]="2147483647"
                   [negative_index]="-3" [truncated_index]="r1_t0.idx")
for kind in short_values missing_index index_too_large negative_index truncated_index; do
  rm -rf "$dir/bad" && cp -r "$dir/good" "$dir/bad" && corrupt "$kind" "$dir/bad"
  for np in 2 3 4 5; do
    start=$(date +%s%N)
    timeout 10 "$mpiexec" -np "$np" "$zen_perf" --trace "$dir/bad" --scheme balanced -c 0 -n 1 -w 0 > "$dir/out.txt" 2>&1
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ]; then
      echo "FAIL $kind np=$np: exit $rc after ${ms} ms (expected a non-zero exit within 10 s)"; fail=1; continue
    fi
    if ! grep -q "zen_perf: rank 1: .*${needle[$kind]}" "$dir/out.txt"; then
      echo "FAIL $kind np=$np: no message from rank 1 naming '${needle[$kind]}':"; sed 's/^/  /' "$dir/out.txt" | head -20; fail=1; continue
    fi
    echo "ok   $kind np=$np: exit $rc in ${ms} ms"
  done
done
exit $fail
