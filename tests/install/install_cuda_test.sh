#!/usr/bin/env bash
# The CUDA configuration installs its cuda (and nccl) component: build the libraries, install into a
# temporary prefix, build a GPU consumer with find_package(zen COMPONENTS cuda) and run it (it checks
# the device hash against the CPU's with a GPU, and says it skipped without one).
#   install_cuda_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
targets=(zen zen_capi_static zen_core zen_schemes zen_cuda zen_trace_lib zen_orbit zen_fl_learn zen_fl_sim zen_fl_loopback)
targets+=(zen_mpi)  # the test exists only in MPI-enabled builds
# Installed too where the configuration has them (the GPU benchmark, the LibTorch adapter).
# The help listing is read whole first: `grep -q` on the pipe would close it early and, under
# pipefail, the SIGPIPE of cmake would read as "target absent".
help=$(cmake --build "$build" --target help 2>/dev/null)
for t in zen_gpu_bench zen_torch; do
  grep -q "^$t:" <<<"$help" && targets+=("$t")
done
cmake --build "$build" --target "${targets[@]}" >"$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
grep -q "zen::cuda" "$tmp/prefix/lib/cmake/zen/zenTargets.cmake" || { echo "FAIL: zen::cuda not exported"; exit 1; }
[ -e "$tmp/prefix/include/zen/cuda/runtime.hpp" ] || { echo "FAIL: zen/cuda headers not installed"; exit 1; }
if ! cmake -S "$src/tests/install/consumer_cuda" -B "$tmp/c" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
     -DCUDAToolkit_ROOT=/usr/local/cuda >"$tmp/c.log" 2>&1 || ! cmake --build "$tmp/c" >>"$tmp/c.log" 2>&1; then
  echo "FAIL: the GPU consumer does not build against the installed zen:"; cat "$tmp/c.log"; exit 1
fi
"$tmp/c/consumer_cuda" || { echo "FAIL: consumer_cuda"; exit 1; }
echo "install_cuda_test: pass"
