#!/usr/bin/env bash
# libFuzzer runs of the decoder / reader targets (tests/fuzz), built with clang in build-fuzz.
#   scripts/fuzz.sh            full mode: 10^7 executions per target (ZEN_FUZZ_RUNS overrides)
#   scripts/fuzz.sh ci         bounded mode: ZEN_FUZZ_SECONDS (default 30) seconds per target
# Each target starts from the seed corpus in tests/fuzz/corpus/<name> (copied into build-fuzz) and
# keeps what it finds there. A crash leaves its input in build-fuzz/fuzz-artifacts/ and fails the run.
# Prints "fuzz: target=T execs=E seconds=S status=ok|FAIL" per target.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-full}
runs=${ZEN_FUZZ_RUNS:-10000000}
secs=${ZEN_FUZZ_SECONDS:-30}
build=${ZEN_FUZZ_BUILD_DIR:-build-fuzz}
cxx=$(command -v clang++-14 || command -v clang++ || true)
cc=$(command -v clang-14 || command -v clang || true)
if [ -z "$cxx" ]; then echo "fuzz: clang++ not found (scripts/deps.sh installs clang)" >&2; exit 1; fi
if [ ! -f "$build/build.ninja" ]; then
  CC=$cc CXX=$cxx cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZEN_WITH_CUDA=OFF \
    -DZEN_WITH_MPI=OFF -DZEN_BUILD_BENCHMARKS=OFF -DZEN_BUILD_EXAMPLES=OFF -DZEN_BUILD_FUZZERS=ON >/dev/null || exit 1
fi
targets=(bitmap coo elias_fano trace orbit_config)
cmake --build "$build" --target "${targets[@]/#/fuzz_}" >/dev/null || exit 1
mkdir -p "$build/fuzz-artifacts"
# Targets run ZEN_FUZZ_JOBS at a time (default: 2 in ci mode, where each run is bounded by time and
# the machine has 2 cores; 1 in full mode); each prints its line when it ends.
jobs=${ZEN_FUZZ_JOBS:-$([ "$mode" = ci ] && echo 2 || echo 1)}
one() {  # TARGET: run it, print its line; exit status 1 on a finding
  local t=$1 corp log start rc took execs st
  corp="$build/fuzz-corpus/$t"
  mkdir -p "$corp"
  cp -n tests/fuzz/corpus/$t/* "$corp"/ 2>/dev/null || true
  if [ "$mode" = ci ]; then limit=(-max_total_time="$secs"); else limit=(-runs="$runs"); fi
  # Decoder inputs beyond a few hundred bytes only repeat the same loops (and cost 10x per run).
  case $t in bitmap) limit+=(-max_len=512) ;; coo | elias_fano) limit+=(-max_len=1024) ;; *) limit+=(-max_len=4096) ;; esac
  log="$build/fuzz-artifacts/$t.log"
  start=$(date +%s)
  "$build/bin/fuzz_$t" "${limit[@]}" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/$t-" "$corp" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  if [ $rc -eq 0 ]; then st=ok; else st=FAIL; fi
  echo "fuzz: target=$t execs=${execs:-?} seconds=$took status=$st corpus=$(ls "$corp" | wc -l)"
  if [ $rc -ne 0 ]; then grep -E "ERROR|SUMMARY|deadly|uncaught|Test unit written" "$log" | head -8; return 1; fi
}
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then wait -n || status=1; running=$((running - 1)); fi
  one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do wait -n || status=1; running=$((running - 1)); done
exit $status
