#!/usr/bin/env bash
# zen_perf --auto-cpu: the model's CPU terms per scheme as auto predicts with them (two ranks as
# threads). A row term on allgather shows in its prediction and moves auto off it; `none` is the
# link-only model; malformed terms are refused with the form they must have.
#   auto_cpu_test.sh ZEN_PERF
set -euo pipefail
perf=$1
run() { "$perf" --threads 2 --scheme auto -b 1M -e 1M -d 0.01 -n 1 -w 0 --explain "$@" 2>&1; }
# allgather: 1 s per row touched (7863 rows here): predicted in hours, never chosen
out=$(run --auto-cpu allgather=0/0/1)
grep -q "model:.* allgather [0-9.e+]* ms (" <<<"$out"
t=$(grep -o "allgather [0-9.e+]* ms" <<<"$out" | awk 'NR == 1 {print $2}')
awk -v t="$t" 'BEGIN { exit !(t > 1e6) }' || { echo "allgather predicted $t ms with 1 s per row"; exit 1; }
if grep -q "auto chose allgather" <<<"$out"; then echo "auto chose allgather at 1 s per row"; exit 1; fi
grep -q "total #wrong: 0" <<<"$out"
# the same value term given as two or as three fields predicts the same
first() { grep -o "allgather [0-9.e+]* [mu]s" <<<"$1" | sed -n 1p; }  # no early exit in a pipe (pipefail)
a=$(first "$(run --auto-cpu allgather=1e-6/0)")
b=$(first "$(run --auto-cpu allgather=1e-6/0/0)")
[ -n "$a" ] && [ "$a" = "$b" ] || { echo "two and three fields differ: '$a' '$b'"; exit 1; }
# link only: allgather's prediction is its bytes and rounds, far below a second
out=$(run --auto-cpu none)
grep -q "model:.* allgather [0-9.e+]* us (" <<<"$out"
for bad in allgather=1 allgather=1/2/3/4 allgather=1x/0 allgather=-1/0 allgather=1//0 =1/2; do
  if msg=$(run --auto-cpu "$bad"); then echo "--auto-cpu $bad was accepted"; exit 1; fi
  grep -q "is not scheme=VALUE_S/DENSE_S\[/ROW_S\]" <<<"$msg" || { echo "--auto-cpu $bad: $msg"; exit 1; }
done
echo "auto-cpu: ok"
