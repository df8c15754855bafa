#!/usr/bin/env bash
# Failures during non-blocking calls on a cluster of network namespaces (scripts/cluster.sh): 4 hosts
# at 1 Gbit/s, one rank each, every rank holding 4 requests on two plans (zen_mpi_nb_faults,
# communicator timeout 1 s); h3's link is taken down. Ranks 0..2 must each see all of their >= 3
# pending requests fail within 2x the timeout of the link going down, every error naming rank 3; a
# later call fail at once (< 100 ms); destroying the plans and the communicator end within 3 s.
# Its own namespaces (prefix zenr, 10.234.0.0/24), apart from the other cluster tests and the demo.
# Exit 77 (ctest: skipped) where network namespaces cannot be created.
#   cluster_nb_test.sh REPO ZEN_MPI_NB_FAULTS
set -uo pipefail
repo=$1 bin=$2
export ZEN_CLUSTER_PREFIX=zenr ZEN_CLUSTER_SUBNET=10.234.0 ZEN_CLUSTER_STATE=/run/zen-cluster-nb
source "$repo/tests/cluster/cluster_lib.sh"
cluster_check_or_skip
dir=$(mktemp -d)
trap 'cl down >/dev/null 2>&1; rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }
tmo=1000
cl up 4 --rate 1gbit || exit 1
cl run -- "$bin" --timeout-ms $tmo --seconds 120 --pending 4 --rows 50000 --victim 3 >"$dir/log" 2>&1 &
job=$!
for _ in $(seq 600); do [ "$(grep -c ' running ' "$dir/log")" -ge 4 ] && break; sleep 0.1; done
[ "$(grep -c ' running ' "$dir/log")" -ge 4 ] || { bad "the job did not start"; cat "$dir/log"; kill "$job"; exit 1; }
sleep 1
t_down=$(now_ms)
cl link h3 down
for _ in $(seq 300); do [ "$(grep -cE '^zen_mpi_nb_faults: rank [012] on ' "$dir/log")" -ge 3 ] && break; sleep 0.1; done
cl link h3 up
for _ in $(seq 600); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$job" 2>/dev/null; then bad "mpirun still running 60 s after the link came back"; kill -9 "$job"; fi
wait "$job"
echo "job exit $?"
for r in 0 1 2; do
  line=$(grep -E "^zen_mpi_nb_faults: rank $r on h$r:" "$dir/log" | head -n1)
  [ -n "$line" ] || { bad "rank $r reported nothing"; continue; }
  read -r pend failed first last named nof later destroy < <(sed -E \
    's/.*pending ([0-9]+), failed ([0-9]+), first at ([0-9]+) last at ([0-9]+) \(epoch ms\), named -?[0-9]+ in ([0-9]+)\/([0-9]+), later call failed in (-?[0-9.]+) ms, destroy ([0-9]+) ms.*/\1 \2 \3 \4 \5 \6 \7 \8/' <<<"$line")
  echo "  rank $r: $pend pending, $failed failed $((first - t_down))..$((last - t_down)) ms after the link went down, $named named rank 3, later call failed in $later ms, destroy $destroy ms"
  [ "$pend" -ge 3 ] || bad "rank $r: only $pend requests were pending"
  [ "$failed" = "$pend" ] || bad "rank $r: $failed of $pend pending requests failed"
  [ "$named" = "$failed" ] || bad "rank $r: only $named of $failed errors name rank 3: $line"
  [ $((last - t_down)) -le $((2 * tmo)) ] || bad "rank $r: last pending request failed $((last - t_down)) ms after the link went down (> 2x $tmo ms)"
  awk -v l="$later" 'BEGIN { exit !(l >= 0 && l < 100) }' || bad "rank $r: the later call took $later ms to fail"
  [ "$destroy" -le 3000 ] || bad "rank $r: destroying took $destroy ms"
done
if grep -q WRONG "$dir/log"; then bad "a wrong result"; fi
[ $fail = 0 ] || cat "$dir/log"
[ $fail = 0 ] && echo "cluster_nonblocking_link_down: pass"
exit $fail
