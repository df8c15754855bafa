#!/usr/bin/env bash
# scripts/bench_first_calls.sh and scripts/first_calls_table.py on one small row (2 ranks, 64 KB,
# dense output, two fixed schemes, 2 repetitions): each job is a process of its own with one row, the
# later jobs start from the remembered choice, the table names the row and #wrong 0; a result with a
# wrong element makes the table fail.
#   first_calls_test.sh MPIEXEC ZEN_PERF SOURCE_DIR
set -euo pipefail
mpiexec=$1 perf=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out
if ! log=$(ZEN_MPIRUN=$mpiexec ZEN_PERF=$perf ZEN_SCHEMES=allgather,balanced ZEN_NP=2 ZEN_OUTPUTS=dense ZEN_ROWS=64K \
  bash "$src/scripts/bench_first_calls.sh" "$out" 2 2>&1); then
  echo "$log"; exit 1
fi
jobs=$(ls "$out"/64K-n2-dense-r[12]-*.json | wc -l)
[ "$jobs" -eq 8 ] || { echo "want 2 x (2 fixed + auto + auto-later) = 8 jobs, got $jobs"; ls "$out"; exit 1; }
for f in "$out"/64K-n2-dense-r[12]-*.json; do
  rows=$(/usr/bin/python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["rows"]))' "$f")
  [ "$rows" -eq 1 ] || { echo "$f: $rows rows, want one scheme per job"; exit 1; }
done
grep -qE "^\| demo 64 KB \| 2 \| dense \| (allgather|balanced) " <<<"$log" || { echo "no table row:"; echo "$log"; exit 1; }
grep -qE "\| 2 of 2 \|$" <<<"$log" || { echo "the later jobs did not start from the remembered choice:"; echo "$log"; exit 1; }
grep -q "^total #wrong: 0$" <<<"$log" || { echo "$log"; exit 1; }
# One wrong element anywhere fails the table.
sed -i 's/"total_wrong": *0/"total_wrong": 1/' "$out/64K-n2-dense-r1-auto.json"
if bad=$(/usr/bin/python3 "$src/scripts/first_calls_table.py" "$out"); then echo "a wrong result passed:"; echo "$bad"; exit 1; fi
grep -q "^total #wrong: 1$" <<<"$bad" || { echo "$bad"; exit 1; }
echo "first calls: ok"
