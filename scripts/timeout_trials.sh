#!/usr/bin/env bash
# Timeout trials: TRIALS (default 20) trials on loopback (4 ranks) and under mpirun (4 processes).
# In each, one rank does not take part in a blocking operation (cycling through recv, sendrecv,
# alltoallv, allgatherv, allgather, allreduce, broadcast, barrier); prints the detection latency of the
# slowest waiting rank per trial and a summary against the timeout (must be < 2x, naming the rank).
#   scripts/timeout_trials.sh [TRIALS] [TIMEOUT_MS]     env: ZEN_BUILD_DIR (default build)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
trials=${1:-20}
tmo=${2:-1000}
build=${ZEN_BUILD_DIR:-build}
if [ ! -f "$build/build.ninja" ]; then cmake --preset cpu >/dev/null || exit 1; fi
cmake --build "$build" --target zen_timeout_trials >/dev/null || exit 1
status=0
"$build/bin/zen_timeout_trials" --backend loopback --ranks 4 --trials "$trials" --timeout-ms "$tmo" || status=1
if command -v mpirun >/dev/null; then
  mpirun -n 4 "$build/bin/zen_timeout_trials" --backend mpi --trials "$trials" --timeout-ms "$tmo" || status=1
else
  echo "timeout-trials: mpirun not found, MPI trials skipped"
fi
exit $status
