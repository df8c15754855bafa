#!/usr/bin/env bash
# The device check, in two halves (docs/gpu.md, "The device check"):
#
#   scripts/gpu_check.sh --build PKG     here (nvcc, Debian 12): build the GPU tests (test_cuda,
#       test_capi_gpu) and zen_gpu_bench for sm_90 (90-real), without MPI, GoogleTest and libstdc++
#       linked statically, zen_cuda and libzen shared (the kernels once, not per binary), RUNPATH
#       $ORIGIN, libcudart carried; stripped. PKG (at most 8 files, 64 MiB) is all a GPU machine
#       needs besides a driver and NCCL.
#   scripts/gpu_check.sh --dry-run PKG   --build, then list every carried binary's dynamic
#       dependencies and check that they resolve from the package plus what a GPU machine has (the C
#       library, and NCCL: here the CUDA toolkit's, there pip's); without a GPU, rehearse --run on the
#       package (every test must fail, since --run turns skips into failures, and the summary must
#       be valid JSON saying so). Runs in CI (scripts/test.sh).
#   scripts/gpu_check.sh --run PKG [--full] [OUT]   on the GPU machine (OUT defaults to PKG/results):
#       NCCL from the PyTorch venv (python3 says where nvidia/nccl/lib is; ZEN_NCCL_LIB overrides),
#       NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1, ZEN_GPU_REQUIRED=1 (a skip fails), each test suite as
#       its own process under a timeout, then the benchmark (214 M @ 5.2 % hash + compact, and a
#       balanced allreduce over 8 device-loopback ranks on the Brown trace shape; --full adds the
#       214 M-row path). OUT/gpu_check.json is rewritten after every suite, so a kill leaves the
#       figures so far. At most ZEN_CHECK_BUDGET seconds (default 290: under 5 minutes; --full 410).
# What goes to the GPU machine: this script (tracked, it travels with the tree) and the package,
# exactly these 7 files (about 8 MiB; --build refuses more than 8 files or 64 MiB):
#   test_cuda  test_capi_gpu  zen_gpu_bench      the GPU tests and the benchmark (stripped)
#   libzen_cuda.so  libzen.so.0                 zen's device path and the C API (RUNPATH $ORIGIN)
#   libcudart.so.13                             the CUDA runtime of the toolkit they were built with
#   manifest.json                               commit, nvcc, arch, size
# Nothing else: no MPI, no GoogleTest or libstdc++ (static), no libcuda (the driver's), no NCCL
# (pip's nvidia-nccl in the machine's PyTorch venv). Device-session command (the run tool copies
# the tree; the package is ignored by git, so carry it):
#   run(command="bash scripts/gpu_check.sh --run gpu-pkg $OUT", carry=["gpu-pkg"], timeout_s=420)
# Five minutes by construction: every step that runs a binary is under `timeout -k GRACE`
# (SIGKILL GRACE seconds after SIGTERM, for a process stuck in the driver), the suites' limits are
# cut to what the budget leaves after the benchmark's share and the grace, and the benchmark gets
# what is left: the run ends within ZEN_CHECK_BUDGET + GRACE seconds (290 + 5) plus the summary
# writes. tests/device/gpu_check_budget_test.sh checks this on a package whose binaries hang.
# Exit status 0 when everything asked for passed (--run: every suite passed, no test skipped, the
# benchmark's #wrong is 0).
set -uo pipefail
usage() { echo "usage: scripts/gpu_check.sh --build PKG | --dry-run PKG | --run PKG [--full] [OUT]" >&2; exit 2; }
[ $# -ge 2 ] || usage
mode=$1 pkg=$2
shift 2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T0=$(date +%s)
stage() { echo; echo "=== [$(( $(date +%s) - T0 ))s] $*"; }
readonly MAX_FILES=8 MAX_BYTES=$((64 * 1024 * 1024))
readonly BINARIES="test_cuda test_capi_gpu zen_gpu_bench"
readonly GRACE=${ZEN_CHECK_GRACE:-5}  # seconds between a timeout's SIGTERM and its SIGKILL
bounded() { local s=$1; shift; timeout -k "$GRACE" "$s" "$@"; }  # SECONDS CMD...: ends by SECONDS + GRACE

# --------------------------------------------------------------------------------------- build
build_package() {
  local build=${ZEN_GPU_BUILD:-$ROOT/build-gpu}
  local jobs=${ZEN_JOBS:-$(nproc)}
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  stage "configure $build (sm_90 real, no MPI, shared zen_cuda)"
  mkdir -p "$build" || return 1
  # RUNPATH $ORIGIN (the package: everything in one folder) and $ORIGIN/../lib (the build tree,
  # where the tests are listed after linking).
  cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DZEN_WITH_CUDA=ON -DZEN_WITH_NCCL=ON -DZEN_WITH_MPI=OFF -DZEN_WITH_TORCH=OFF -DZEN_CUDA_SHARED=ON \
    -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90-real \
    -DZEN_BUILD_BENCHMARKS=OFF -DZEN_BUILD_EXAMPLES=OFF \
    -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON '-DCMAKE_INSTALL_RPATH=$ORIGIN;$ORIGIN/../lib' \
    '-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc' \
    '-DCMAKE_SHARED_LINKER_FLAGS=-static-libstdc++ -static-libgcc' >"$build/gpu_check.configure.log" 2>&1 ||
    { tail -30 "$build/gpu_check.configure.log"; return 1; }
  stage "build $BINARIES (-j $jobs)"
  # shellcheck disable=SC2086
  cmake --build "$build" -j "$jobs" --target $BINARIES >"$build/gpu_check.build.log" 2>&1 || { tail -40 "$build/gpu_check.build.log"; return 1; }
  stage "package $pkg"
  rm -rf "$pkg" && mkdir -p "$pkg" || return 1
  local b
  for b in $BINARIES; do cp "$build/bin/$b" "$pkg/" || return 1; done
  cp "$build/lib/libzen_cuda.so" "$pkg/" || return 1
  # libzen.so is a link chain (libzen.so -> .so.0 -> .so.0.1.0): carry the file under its SONAME.
  local soname
  soname=$(objdump -p "$build/lib/libzen.so" | awk '/SONAME/ {print $2}')
  cp -L "$build/lib/libzen.so" "$pkg/${soname:-libzen.so}" || return 1
  cp -L "$cuda/lib64/libcudart.so.13" "$pkg/" || return 1
  strip --strip-unneeded "$pkg"/*.so* && strip "$pkg"/test_cuda "$pkg"/test_capi_gpu "$pkg"/zen_gpu_bench || return 1
  local files bytes
  files=$(find "$pkg" -maxdepth 1 -type f | wc -l)
  bytes=$(du -cb "$pkg"/* | tail -1 | cut -f1)
  {
    echo "{"
    echo "  \"commit\": \"$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo '+dirty')\","
    echo "  \"nvcc\": \"$("$cuda/bin/nvcc" --version | tail -1)\","
    echo "  \"arch\": \"90-real\","
    echo "  \"files\": $files, \"bytes\": $bytes"
    echo "}"
  } >"$pkg/manifest.json"
  files=$((files + 1))
  ls -l "$pkg"
  echo "package: $files files, $bytes bytes (limits: $MAX_FILES files, $MAX_BYTES bytes)"
  [ "$files" -le $MAX_FILES ] && [ "$bytes" -le $MAX_BYTES ] || { echo "error: the package exceeds its limits" >&2; return 1; }
}

# ------------------------------------------------------------------------------------- dry run
# What a GPU machine provides besides the package: the C library (and the dynamic loader) and NCCL
# (pip's nvidia-nccl there, whose own dependencies come with its venv; here a folder holding only
# the CUDA toolkit's libnccl.so.2 stands in for it). Never libcuda: the driver is loaded by libcudart
# at run time, nothing links it.
readonly SYSTEM_LIBS="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2 librt.so.1 ld-linux-x86-64.so.2"
dry_run() {
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  local pip
  pip=$(mktemp -d) && ln -s "$cuda/lib64/libnccl.so.2" "$pip/" || return 1
  local abs
  abs=$(cd "$pkg" && pwd)
  stage "dynamic dependencies of the carried binaries (from $pkg, the C library, and NCCL)"
  local f dep where path fail=0 n=0
  for f in "$abs"/*; do
    [ "$f" = "$abs/manifest.json" ] && continue
    n=$((n + 1))
    echo "$(basename "$f") (RUNPATH $(objdump -p "$f" | awk '/RUNPATH|RPATH/ {print $2}')):"
    # Resolved as on the GPU machine: LD_LIBRARY_PATH = NCCL's folder only.
    local resolved
    resolved=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$pip" ldd "$f" 2>&1)
    for dep in $(objdump -p "$f" | awk '/NEEDED/ {print $2}'); do
      path=$(awk -v d="$dep" '$1 == d && $2 == "=>" {print $3}' <<<"$resolved")
      case " $SYSTEM_LIBS " in
        *" $dep "*) where="the C library" ;;
        *)
          if [ -e "$abs/$dep" ]; then
            where="package"
            [ "$path" = "$abs/$dep" ] || { where="FAIL: carried, but the loader takes $path"; fail=1; }
          elif [ "$dep" = libnccl.so.2 ]; then
            where="NCCL (pip's nvidia/nccl/lib there; here $(readlink -f "$path" 2>/dev/null || echo "$path"))"
            [ -n "$path" ] && [ "$path" != not ] || { where="FAIL: not found"; fail=1; }
          else
            where="FAIL: neither carried nor on a GPU machine (resolves here to ${path:-nothing})"
            fail=1
          fi
          ;;
      esac
      case $dep in libcuda.so*) where="FAIL: links the driver"; fail=1 ;; esac
      echo "  $dep: $where"
    done
    if grep -q "not found" <<<"$resolved"; then echo "  FAIL: $(grep "not found" <<<"$resolved" | tr '\n' ' ')"; fail=1; fi
  done
  [ "$n" -ge 5 ] || { echo "FAIL: only $n binaries in $pkg"; fail=1; }
  [ $fail = 0 ] && echo "dry run: every dependency of the $n carried binaries resolves from the package, the C library or NCCL"
  [ $fail = 0 ] && { rehearse_run "$abs" "$pip" || fail=1; }
  rm -rf "$pip"
  return $fail
}

# --run rehearsed where there is no GPU (CI): the package's binaries start, every suite runs as its
# own process, and since --run sets ZEN_GPU_REQUIRED every test fails instead of skipping; the
# summary must be valid JSON that says so (ok false, nothing skipped, one entry per listed suite).
rehearse_run() {  # PKG NCCL_DIR
  if nvidia-smi -L >/dev/null 2>&1; then
    stage "a GPU is present: no rehearsal (run --run)"
    return 0
  fi
  stage "rehearsal of --run without a GPU (every test must fail, none skip)"
  local tmp rc py
  tmp=$(mktemp -d)
  ZEN_NCCL_LIB=$2 ZEN_CHECK_BUDGET=120 ZEN_BENCH_TIMEOUT=20 bash "$ROOT/scripts/gpu_check.sh" --run "$1" "$tmp"     >"$tmp/rehearsal.log" 2>&1
  rc=$?
  py=$(command -v /usr/bin/python3 || command -v python3)
  local suites
  suites=$(for b in test_cuda test_capi_gpu; do "$1/$b" --gtest_list_tests 2>/dev/null | grep -cE '^[A-Za-z0-9_/]+\.'; done |
           awk '{s += $1} END {print s}')
  "$py" - "$tmp/gpu_check.json" "$rc" "$suites" <<'PY'
import json, sys
path, rc, suites = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
d = json.load(open(path))
problems = []
if rc == 0: problems.append("--run exited 0 without a GPU")
if d["ok"]: problems.append("summary says ok")
if d["tests_total"] == 0 or d["tests_failed"] != d["tests_total"]: problems.append("not every test failed")
if d["tests_skipped"]: problems.append("%d tests skipped although ZEN_GPU_REQUIRED is set" % d["tests_skipped"])
if len(d["suites"]) != suites: problems.append("%d suites run, %d listed" % (len(d["suites"]), suites))
if any(s.get("not_run") or s.get("timed_out") or s["rc"] == 0 for s in d["suites"]): problems.append("a suite did not fail by itself")
if d["bench_ok"]: problems.append("the benchmark passed without a GPU")
print("rehearsal: %d suites, %d tests, all failed as required, summary valid" % (len(d["suites"]), d["tests_total"])
      if not problems else "FAIL: rehearsal: " + "; ".join(problems))
sys.exit(1 if problems else 0)
PY
  local ok=$?
  [ $ok = 0 ] || tail -30 "$tmp/rehearsal.log"
  rm -rf "$tmp"
  return $ok
}

# ------------------------------------------------------------------------------------------ run
run_package() {
  local full=false out=""
  while [ $# -gt 0 ]; do
    case $1 in --full) full=true ;; *) out=$1 ;; esac
    shift
  done
  pkg=$(cd "$pkg" && pwd) || exit 2
  out=${out:-$pkg/results}
  mkdir -p "$out" && out=$(cd "$out" && pwd)
  exec > >(tee -a "$out/gpu_check.log") 2>&1
  local nccl=${ZEN_NCCL_LIB:-}
  if [ -z "$nccl" ]; then
    local py
    for py in python3 /usr/bin/python3; do
      nccl=$("$py" -c 'import importlib.util as u, os; s = u.find_spec("nvidia.nccl"); print(os.path.join(list(s.submodule_search_locations)[0], "lib") if s else "")' 2>/dev/null) && [ -n "$nccl" ] && break
    done
  fi
  [ -n "$nccl" ] || echo "warning: no nvidia.nccl in python3's site-packages (set ZEN_NCCL_LIB); the loader must find libnccl.so.2"
  export LD_LIBRARY_PATH="${nccl:+$nccl:}$pkg${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 ZEN_GPU_REQUIRED=1
  local summary=$out/gpu_check.json suites_json="" total=0 failed=0 skipped=0 bench_ok=false bench=null
  local device
  device=$(bounded 10 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  write_summary() {
    local ok=false
    [ "$total" -gt 0 ] && [ "$failed" = 0 ] && [ "$skipped" = 0 ] && $bench_ok && ok=true
    [ -s "$out/gpu_bench.json" ] && bench=$(cat "$out/gpu_bench.json")
    cat >"$summary.tmp" <<EOF
{
  "ok": $ok,
  "device": "${device:-unknown}",
  "nccl_lib": "$nccl",
  "seconds": $(( $(date +%s) - T0 )),
  "tests_total": $total, "tests_failed": $failed, "tests_skipped": $skipped,
  "suites": [${suites_json}
  ],
  "bench_ok": $bench_ok,
  "bench": $bench
}
EOF
    mv "$summary.tmp" "$summary"
  }
  # The whole check stays within ZEN_CHECK_BUDGET seconds (default 290; --full 410, its benchmark
  # takes 120 s more): every suite's timeout is cut to what is left after the benchmark's share;
  # suites that no longer fit are recorded as not run.
  local budget=${ZEN_CHECK_BUDGET:-$($full && echo 410 || echo 290)}
  local bench_limit=${ZEN_BENCH_TIMEOUT:-$($full && echo 240 || echo 120)}
  left() { echo $(( budget - ($(date +%s) - T0) )); }
  run_suite() {  # BINARY SUITE TIMEOUT
    local bin=$1 suite=$2 limit=$3 s0 rc log n_ok n_fail n_skip
    local room=$(( $(left) - bench_limit - GRACE ))
    if [ "$room" -lt 10 ]; then
      failed=$((failed + 1))
      suites_json="$suites_json${suites_json:+,}
    {\"binary\": \"$bin\", \"suite\": \"$suite\", \"not_run\": true}"
      echo "$bin $suite: not run (the time budget of $budget s is spent)"
      write_summary
      return
    fi
    [ "$room" -lt "$limit" ] && limit=$room
    s0=$(date +%s)
    log="$out/$(echo "$bin.$suite" | tr '/' '_').log"
    bounded "$limit" "$pkg/$bin" --gtest_filter="$suite.*" --gtest_brief=0 >"$log" 2>&1
    rc=$?
    [ $rc = 137 ] && rc=124  # killed after the grace: a timeout too
    n_ok=$(grep -cE '^\[       OK \] .* \([0-9]+ ms\)$' "$log")
    n_fail=$(grep -cE '^\[  FAILED  \] .* \([0-9]+ ms\)$' "$log")
    n_skip=$(grep -cE '^\[  SKIPPED \] .* \([0-9]+ ms\)$' "$log")
    [ $rc -ne 0 ] && [ "$n_fail" = 0 ] && n_fail=1  # a crash or a timeout
    total=$((total + n_ok + n_fail + n_skip)); failed=$((failed + n_fail)); skipped=$((skipped + n_skip))
    suites_json="$suites_json${suites_json:+,}
    {\"binary\": \"$bin\", \"suite\": \"$suite\", \"rc\": $rc, \"timed_out\": $([ $rc = 124 ] && echo true || echo false), \"passed\": $n_ok, \"failed\": $n_fail, \"skipped\": $n_skip, \"seconds\": $(( $(date +%s) - s0 ))}"
    echo "$bin $suite: rc $rc, $n_ok passed, $n_fail failed, $n_skip skipped, $(( $(date +%s) - s0 )) s"
    [ $rc -ne 0 ] && tail -20 "$log"
    write_summary
  }
  stage "GPU: ${device:-unknown}; NCCL: ${nccl:-found by the loader}"
  write_summary
  local bin suite
  for bin in test_cuda test_capi_gpu; do
    for suite in $(bounded 20 "$pkg/$bin" --gtest_list_tests 2>/dev/null | awk '/^[A-Za-z0-9_\/]+\./ { sub(/\..*/, ""); print }'); do
      run_suite "$bin" "$suite" "${ZEN_SUITE_TIMEOUT:-120}"
    done
  done
  stage "benchmark"
  local args=()
  $full && args+=(--full)
  [ "$(( $(left) - GRACE ))" -lt "$bench_limit" ] && bench_limit=$(( $(left) - GRACE ))
  [ "$bench_limit" -lt 1 ] && bench_limit=1
  if bounded "$bench_limit" "$pkg/zen_gpu_bench" --json "$out/gpu_bench.json" "${args[@]}"; then
    bench_ok=true
  fi
  write_summary
  stage "summary ($summary)"
  cat "$summary"
  grep -q '"ok": true' "$summary"
}

case $mode in
  --build) build_package ;;
  --dry-run) build_package && dry_run ;;
  --run) run_package "$@" ;;
  *) usage ;;
esac
