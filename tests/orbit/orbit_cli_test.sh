#!/usr/bin/env bash
# zen_orbit (tools/zen_orbit) end to end on the tiny Fashion-MNIST sample: the tool picks the
# learner's backend. Loopback and MPI (3 processes) must report the same accuracy; a loopback run
# started under mpirun refuses (several copies would write the same files).
#   orbit_cli_test.sh ZEN_ORBIT DATA_DIR [MPIEXEC]
set -euo pipefail
bin=$1 data=$2 mpiexec=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(fl --data-dir "$data" --rounds 2 --model mlp --hidden 8 --train-time 60 --scheme ring --preset ka)
"$bin" "${args[@]}" --out "$tmp/loop" >"$tmp/loop.txt"
grep -q "final_acc=" "$tmp/loop.txt" || { echo "no summary line"; cat "$tmp/loop.txt"; exit 1; }
ls "$tmp/loop"/*.csv >/dev/null
acc_loop=$(grep -o "final_acc=[0-9.]*" "$tmp/loop.txt")
# compare with work-based training times and the compute sweep: one table row per throughput.
"$bin" compare --data-dir "$data" --rounds 2 --presets ka --train-time work --onboard-gflops 0.01 \
  --sweep-gflops 0.001,1 >"$tmp/cmp.txt"
grep -q "train time work (mean" "$tmp/cmp.txt" || { echo "compare did not report work-based training"; cat "$tmp/cmp.txt"; exit 1; }
[ "$(grep -cE '^\| (0.001|1) \|' "$tmp/cmp.txt")" = 2 ] || { echo "compute sweep rows missing"; cat "$tmp/cmp.txt"; exit 1; }
# The paper's scenario brings its settings and prints the published figures next to the run's.
"$bin" compare --scenario razmi2022 --data-dir "$data" --rounds 2 >"$tmp/paper.txt"
grep -q "published: 29x training-time speed-up, 8x fewer server transfers" "$tmp/paper.txt" &&
  grep -q "this run, ring vs baseline (preset scenario)" "$tmp/paper.txt" &&
  grep -q "^| ring | " "$tmp/paper.txt" || { echo "razmi2022 compare output incomplete"; cat "$tmp/paper.txt"; exit 1; }
if [ -n "$mpiexec" ]; then
  "$mpiexec" -n 3 "$bin" "${args[@]}" --backend mpi --out "$tmp/mpi" >"$tmp/mpi.txt"
  acc_mpi=$(grep -o "final_acc=[0-9.]*" "$tmp/mpi.txt")
  [ "$acc_loop" = "$acc_mpi" ] || { echo "loopback $acc_loop but mpi $acc_mpi"; exit 1; }
  if "$mpiexec" -n 2 "$bin" "${args[@]}" --out "$tmp/twice" >"$tmp/twice.txt" 2>&1; then
    echo "a loopback run under mpirun -n 2 did not refuse"; exit 1
  fi
  grep -q "add --backend mpi" "$tmp/twice.txt" || { cat "$tmp/twice.txt"; exit 1; }
fi
echo "orbit_cli: loopback $acc_loop${mpiexec:+, mpi the same}"
