#!/usr/bin/env bash
# ZEN_GPU_REQUIRED=1 turns every "no GPU" skip into a failure. Without a GPU (CI): the test binary
# skips its GPU tests, and with the switch the same tests fail, naming it. With a GPU: nothing is
# skipped, so there is nothing to check and the test passes.
#   gpu_required_test.sh TEST_BINARY
set -uo pipefail
bin=$1
filter='CudaPartition.*:DeviceKernels.HashPartitionMatchesCpu:Nccl.*'
plain=$(ZEN_GPU_REQUIRED= "$bin" --gtest_filter="$filter" 2>&1)
if ! grep -q '\[  SKIPPED \]' <<<"$plain"; then
  echo "gpu_required_test: nothing skipped (a GPU is present); nothing to check"
  exit 0
fi
required=$(ZEN_GPU_REQUIRED=1 "$bin" --gtest_filter="$filter" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then echo "FAIL: with ZEN_GPU_REQUIRED=1 the skipped tests still pass:"; echo "$required" | tail -20; exit 1; fi
if grep -q '\[  SKIPPED \]' <<<"$required"; then echo "FAIL: with ZEN_GPU_REQUIRED=1 tests still skip:"; echo "$required" | tail -20; exit 1; fi
grep -q 'ZEN_GPU_REQUIRED is set' <<<"$required" || { echo "FAIL: the failure does not name ZEN_GPU_REQUIRED"; exit 1; }
echo "gpu_required_test: $(grep -c '\[  FAILED  \] ' <<<"$required") failures with ZEN_GPU_REQUIRED=1 where $(grep -c '\[  SKIPPED \] ' <<<"$plain") tests skipped without it"
