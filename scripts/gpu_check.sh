#!/usr/bin/env bash
# GPU check: build the CUDA configuration (no MPI), run the GPU tests (ctest -L gpu) and the GPU
# benchmark, and write OUTDIR/gpu_check.json (summary), OUTDIR/gpu_bench.json, OUTDIR/gpu_tests.xml
# (JUnit) and OUTDIR/gpu_check.log. Meant for a machine with nvcc, CMake and Ninja but without
# Eigen, GoogleTest, nlohmann-json, CLI11 or zlib headers: when the ignored folder .debs/ holds the
# Debian packages (fetch them on a Debian 12 machine with
#   mkdir -p .debs && cd .debs && apt-get download libeigen3-dev googletest libgtest-dev \
#       nlohmann-json3-dev libcli11-dev zlib1g-dev zlib1g
# ), they are unpacked into .debs/root and GoogleTest is compiled from its sources with this
# machine's compiler (no C++ ABI mismatch). Device-session command (see docs/gpu.md):
#   run(command="bash scripts/gpu_check.sh $OUT", carry=[".debs"], timeout_s=540)
# Exit status: 0 when the build, every GPU test and the benchmark (#wrong == 0) succeed.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu_check.log"
: > "$LOG"
exec > >(tee -a "$LOG") 2>&1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
JOBS=${ZEN_JOBS:-$(nproc)}
BUILD=${ZEN_GPU_BUILD:-build-gpu}
export PATH=/usr/local/cuda/bin:$PATH
T0=$(date +%s)
stage() { echo; echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

build_ok=false; tests_ok=false; bench_ok=false
tests_total=0; tests_failed=0; tests_skipped=0

# ---------------------------------------------------------------- 1. dependencies from .debs
DEP_ARGS=()
if compgen -G ".debs/*.deb" > /dev/null; then
  stage "unpacking .debs"
  DEPS="$ROOT/.debs/root"
  mkdir -p "$DEPS"
  for f in .debs/*.deb; do
    stamp="$DEPS/.$(basename "$f").done"
    [ -f "$stamp" ] && continue
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$f" "$DEPS"
    else  # plain ar + tar
      tmp=$(mktemp -d); (cd "$tmp" && ar x "$ROOT/$f" && tar xf data.tar.* -C "$DEPS"); rm -rf "$tmp"
    fi
    touch "$stamp"
  done
  GT_PREFIX="$DEPS/gtest-install"
  if [ -d "$DEPS/usr/src/googletest" ] && ! compgen -G "$GT_PREFIX/lib*/cmake/GTest/GTestConfig.cmake" > /dev/null; then
    stage "building GoogleTest from source"
    cmake -S "$DEPS/usr/src/googletest" -B "$DEPS/gtest-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
      -DINSTALL_GTEST=ON -DCMAKE_INSTALL_PREFIX="$GT_PREFIX" -DCMAKE_POSITION_INDEPENDENT_CODE=ON > /dev/null &&
      cmake --build "$DEPS/gtest-build" -j "$JOBS" > /dev/null && cmake --install "$DEPS/gtest-build" > /dev/null ||
      echo "warning: GoogleTest source build failed; falling back to the packaged libgtest.a"
  fi
  GT_DIR=$(dirname "$(compgen -G "$GT_PREFIX/lib*/cmake/GTest/GTestConfig.cmake" | head -1)" 2> /dev/null)
  [ -n "$GT_DIR" ] && [ -f "$GT_DIR/GTestConfig.cmake" ] || GT_DIR="$DEPS/usr/lib/x86_64-linux-gnu/cmake/GTest"
  DEP_ARGS+=(
    "-DCMAKE_PREFIX_PATH=$DEPS/usr"
    "-DEigen3_DIR=$DEPS/usr/share/eigen3/cmake"
    "-DGTest_DIR=$GT_DIR"
    "-Dnlohmann_json_DIR=$DEPS/usr/share/cmake/nlohmann_json"
    "-DCLI11_DIR=$DEPS/usr/share/cmake/CLI11"
    "-DZLIB_INCLUDE_DIR=$DEPS/usr/include"
    "-DZLIB_LIBRARY=$DEPS/usr/lib/x86_64-linux-gnu/libz.a"
  )
fi

# ---------------------------------------------------------------- 2. configure + build
stage "configure ($BUILD)"
nvcc --version | tail -2 || true
if cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZEN_WITH_CUDA=ON -DZEN_WITH_NCCL=ON -DZEN_WITH_MPI=OFF \
     -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DZEN_BUILD_BENCHMARKS=OFF -DZEN_BUILD_EXAMPLES=OFF "${DEP_ARGS[@]}"; then
  stage "build zen_cuda_all (-j $JOBS)"
  if cmake --build "$BUILD" -j "$JOBS" --target zen_cuda_all; then build_ok=true; fi
fi

# ---------------------------------------------------------------- 3. GPU tests
if $build_ok; then
  stage "GPU tests (ctest -L gpu)"
  ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 300 -j 1 --output-junit "$OUT/gpu_tests.xml" \
    2>&1 | tee "$OUT/ctest.txt"
  summary=$(grep -E "tests passed, [0-9]+ tests failed out of" "$OUT/ctest.txt" | tail -1)
  tests_failed=$(echo "$summary" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/')
  tests_total=$(echo "$summary" | sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/')
  tests_skipped=$(grep -cE "Test +#[0-9]+: .*\*\*\*Skipped" "$OUT/ctest.txt")
  [ -n "$tests_total" ] && [ "$tests_total" -gt 0 ] && [ "$tests_failed" = 0 ] && tests_ok=true
  [ -z "$tests_total" ] && tests_total=0 && tests_failed=0
fi

# ---------------------------------------------------------------- 4. GPU benchmark
if $build_ok; then
  stage "GPU benchmark"
  if timeout 180 "$BUILD/bin/zen_gpu_bench" --json "$OUT/gpu_bench.json" ${ZEN_GPU_BENCH_ARGS:-}; then bench_ok=true; fi
fi

# ---------------------------------------------------------------- 5. summary
stage "summary"
bench_json=null
[ -s "$OUT/gpu_bench.json" ] && bench_json=$(cat "$OUT/gpu_bench.json")
cat > "$OUT/gpu_check.json" << EOF
{
  "build_ok": $build_ok,
  "tests_ok": $tests_ok,
  "tests_total": ${tests_total:-0},
  "tests_failed": ${tests_failed:-0},
  "tests_skipped": ${tests_skipped:-0},
  "bench_ok": $bench_ok,
  "seconds": $(( $(date +%s) - T0 )),
  "bench": $bench_json
}
EOF
cat "$OUT/gpu_check.json"
$build_ok && $tests_ok && $bench_ok
