#!/usr/bin/env bash
# zen_perf --prelude and --auto-cache under mpirun (2 ranks): the prelude's calls are not a row and
# are recorded in the JSON; a second run with the same cache file starts auto from the first run's
# remembered choice; the prelude needs the MPI backend (refused on the threads backend, by name).
#   prelude_cache_test.sh MPIEXEC ZEN_PERF
set -euo pipefail
mpiexec=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {
  "$mpiexec" -np 2 "$perf" --scheme allgather,auto -b 40004 -e 40004 -c 1 -n 4 -w 0 --auto-settle 0 --prelude 2 \
    --auto-cache "$tmp/cache" --auto-explore 1 --explain --json "$tmp/$1.json" 2>&1
}
first=$(run a)
grep -q "total #wrong: 0" <<<"$first" || { echo "$first"; exit 1; }
if grep -qE "^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +mpi_allgatherv " <<<"$first"; then echo "the prelude's calls were reported as a row"; exit 1; fi
grep -qE "^ +[0-9]+ +[0-9]+ +[a-z0-9]+ +allgather " <<<"$first" || { echo "no allgather row:"; echo "$first"; exit 1; }
grep -q '"prelude": *2' "$tmp/a.json" || { echo "no \"prelude\": 2 in the JSON"; exit 1; }
[ "$(wc -l <"$tmp/cache")" -eq 2 ] || { echo "want one cache line per rank:"; cat "$tmp/cache"; exit 1; }
second=$(run b)
grep -q "total #wrong: 0" <<<"$second" || { echo "$second"; exit 1; }
grep -q "(first call): remembered in $tmp/cache" <<<"$second" || { echo "second run did not start from the cache:"; echo "$second"; exit 1; }
if msg=$("$perf" --threads 2 --scheme allgather -b 4000 -e 4000 -n 1 -w 0 --prelude 1 2>&1); then
  echo "--prelude was accepted on the threads backend"; exit 1
fi
grep -q "needs the MPI backend" <<<"$msg" || { echo "--prelude on threads: $msg"; exit 1; }
echo "prelude and cache: ok"
