#!/usr/bin/env bash
# zen_perf on a trace of N = 2^33 + 7 held sparsely, checked (-c 1) and dumped (--dump), under a
# virtual-memory cap of 3 GiB: a single O(N) buffer (32 GiB of f32) would fail the run.
#   huge_trace_test.sh MAKE_HUGE_TRACE ZEN_PERF
set -euo pipefail
make=$1
perf=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$make" "$dir/trace"
ulimit -v 3145728
"$perf" --threads 2 --trace "$dir/trace" --scheme all --output sparse -c 1 -n 2 -w 1 --dump "$dir/out" | tee "$dir/log"
grep -q "total #wrong: 0" "$dir/log"
for s in balanced allgather sparse_ps; do
  test -s "$dir/out/$s/trace.json"
  test -s "$dir/out/$s/r1_t1.idx"
done
echo "huge trace: ok"
