#!/usr/bin/env bash
# Differential sweep: CASES random cases (default 10^6) of every scheme against the exact reference on
# the loopback backend, split over JOBS processes (default: the core count). A case that crashes the
# process is recorded (from the --progress file) and the sweep resumes after it.
#   scripts/differential.sh [CASES] [JOBS]   env: ZEN_BUILD_DIR (default build), ZEN_DIFF_SEED,
#                                            ZEN_DIFF_BIN (a prebuilt zen_differential)
# Prints "differential: cases=... failures=... crashes=... seconds=..." and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cases=${1:-1000000}
jobs=${2:-$ZEN_NPROC}
seed=${ZEN_DIFF_SEED:-1000}
build=${ZEN_BUILD_DIR:-build}
bin=${ZEN_DIFF_BIN:-}
if [ -z "$bin" ]; then
  if [ ! -f "$build/build.ninja" ]; then cmake --preset cpu >/dev/null || exit 1; fi
  cmake --build "$build" --target zen_differential >/dev/null || exit 1
  bin="$build/bin/zen_differential"
fi
work=$(mktemp -d)
start=$(date +%s)

run_slice() {  # $1 = job index, $2 = first case, $3 = end (exclusive)
  local j=$1 first=$2 end=$3 crashes=0
  while [ "$first" -lt "$end" ]; do
    "$bin" --seed "$seed" --first "$first" --cases $((end - first)) --progress "$work/p$j" \
      >>"$work/out$j" 2>>"$work/err$j"
    local rc=$?
    if grep -q "^differential:" "$work/out$j" 2>/dev/null && [ "$rc" -le 1 ]; then break; fi
    # Crashed: the progress file names the case that was running.
    local id
    id=$(cat "$work/p$j" 2>/dev/null || echo "$first")
    echo "CRASH case $id (seed $seed, exit $rc): rerun with $bin --seed $seed --first $id --cases 1 --verbose" >>"$work/err$j"
    crashes=$((crashes + 1))
    first=$((id + 1))
  done
  echo "$crashes" >"$work/crashes$j"
}

per=$(( (cases + jobs - 1) / jobs ))
for ((j = 0; j < jobs; j++)); do
  b=$((j * per)); e=$((b + per)); [ "$e" -gt "$cases" ] && e=$cases
  [ "$b" -ge "$e" ] && { echo 0 >"$work/crashes$j"; continue; }
  run_slice "$j" "$b" "$e" &
done
wait
secs=$(( $(date +%s) - start ))
fails=$(cat "$work"/err* 2>/dev/null | grep -c "^FAIL" || true)
crashes=$(cat "$work"/crashes* | awk '{s+=$1} END {print s+0}')
echo "first failures:"; cat "$work"/err* 2>/dev/null | grep -A1 -E "^(FAIL|CRASH)" | head -40
cat "$work"/out* 2>/dev/null | grep "^differential:" | sed 's/^/  slice: /'
echo "differential: cases=$cases failures=$fails crashes=$crashes seconds=$secs jobs=$jobs seed=$seed backend=loopback"
rm -rf "$work"
[ "$fails" -eq 0 ] && [ "$crashes" -eq 0 ]
