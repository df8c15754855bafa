#!/usr/bin/env bash
# zen_perf --trace T --dump D writes, for every iteration t of a multi-iteration trace, the result of
# the call on iteration t's inputs. Every combination of --output dense|sparse and -c 0|1, every
# scheme (and the raw MPI baselines that have a sparse result), under mpirun -n 3; each dumped record
# is checked by zen_dump_check against the trace reader plus a plain sparse sum. The trace's
# iterations have different supports, so a dump of another iteration's result cannot pass.
#   dump_replay_test.sh MPIEXEC ZEN_TRACE ZEN_PERF ZEN_DUMP_CHECK
set -uo pipefail
mpiexec=$1 ztrace=$2 perf=$3 check=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# N not divisible by 3, 4 iterations, ranks overlapping in part (gamma 2 of 3).
"$ztrace" synthetic -o "$tmp/in" -N 30001 -n 3 -T 4 -d 0.02 -g 2 --seed 7 >/dev/null || { echo "FAIL: zen_trace"; exit 1; }
for out in dense sparse; do
  for c in 0 1; do
    d="$tmp/dump-$out-c$c"
    if ! "$mpiexec" -n 3 "$perf" --trace "$tmp/in" --dump "$d" --output $out -c $c --scheme all -n 3 -w 1 >"$tmp/log" 2>&1; then
      echo "FAIL: zen_perf --output $out -c $c exited non-zero"; cat "$tmp/log"; fail=1; continue
    fi
    dirs=("$d"/*/)
    [ ${#dirs[@]} -ge 8 ] || { echo "FAIL: --output $out -c $c: only ${#dirs[@]} schemes dumped"; fail=1; }
    "$check" "$tmp/in" "${dirs[@]%/}" >"$tmp/check" || fail=1
    sed "s|$tmp/||" "$tmp/check"
  done
done
[ $fail = 0 ] && echo "dump_replay_test: pass"
exit $fail
