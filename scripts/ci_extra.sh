#!/usr/bin/env bash
# Extra CI stage of the reliability suite, what ctest does not run: bounded libFuzzer runs of every
# fuzz target, a differential sweep under mpirun (n = 3, 4, 7) and a few timeout trials. The failure
# tests (loopback, MPI, crash of a rank under mpirun) are ctest entries (label reliability) and run
# in scripts/test.sh's suite, once. ~4 min on 2 cores.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
build=${ZEN_BUILD_DIR:-build}
status=0
ZEN_FUZZ_SECONDS=${ZEN_FUZZ_SECONDS:-20} bash scripts/fuzz.sh ci || status=1
if [ ! -f "$build/build.ninja" ]; then cmake --preset cpu >/dev/null || exit 1; fi
# The whole tree (scripts/test.sh later finds it built).
blog=$(mktemp)
cmake --build "$build" -j "$ZEN_NPROC" >"$blog" 2>&1 || { tail -n 60 "$blog"; exit 1; }
# MPI parts only where the MPI backend is built.
if command -v mpirun >/dev/null && cmake --build "$build" --target test_reliability_failures_mpi zen_mpi_crash >/dev/null 2>&1; then
  for np in 3 4 7; do
    mpirun -n $np "$build/bin/zen_differential" --backend mpi --cases 300 --seed $((500 + np)) || status=1
  done
fi
bash scripts/timeout_trials.sh 4 500 || status=1
exit $status
