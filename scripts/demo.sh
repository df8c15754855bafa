#!/usr/bin/env bash
# Install missing deps, build, and run the main job on this machine's MPI ranks: zen_perf comparing
# every sparse allreduce scheme (checked results) at a sparse, partially overlapping, skewed workload.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
cmake --preset cpu >/dev/null
cmake --build build -j "$ZEN_NPROC"
np=${ZEN_DEMO_RANKS:-$(( ZEN_NPROC < 4 ? 4 : ZEN_NPROC ))}
if [ -x build/bin/zen_perf ]; then
  mpirun -np "$np" build/bin/zen_perf --scheme all -b 1M -e 16M -f 4 -d 0.01 --overlap $(( np / 2 > 1 ? np / 2 : 1 )) --skew 1.1 -c 1 -n 5 -w 1
else
  echo "zen_perf not built yet: running the encoding and communicator self-check instead"
  mpirun -np "$np" build/bin/test_mpi
fi
