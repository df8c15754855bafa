#!/usr/bin/env bash
# Cases on a cluster of network namespaces (scripts/cluster.sh), one cluster per case, removed after:
#   exact        4 hosts, 1 Gbit/s: every scheme and the raw MPI baselines, a corpus trace and a
#                synthetic tensor, dense and sparse output: #wrong 0
#   hierarchical 4 hosts x 2 ranks: hier_balanced / hier_allgather (shared memory inside a host, TCP
#                across) exact, bytes inside and across hosts both reported and non-zero
#   straggler    4 hosts at 1 Gbit/s, then h3 re-shaped 100x slower: still exact; the slowdown is printed
#   link_down    h3's link taken down during a loop of balanced allreduces: ranks 0..2 fail within 2x the
#                timeout, each naming rank 3
#   host_killed  every process on h3 killed mid-loop: mpirun ends (non-zero), no hang
# Exit 77 (ctest: skipped) where network namespaces cannot be created.
#   cluster_test.sh CASE REPO ZEN_PERF ZEN_TRACE ZEN_CLUSTER_FAULT
set -uo pipefail
case_=$1 repo=$2 perf=$3 ztrace=$4 fault=$5
export ZEN_CLUSTER_PREFIX=zent ZEN_CLUSTER_SUBNET=10.232.0 ZEN_CLUSTER_STATE=/run/zen-cluster-test
source "$repo/tests/cluster/cluster_lib.sh"
cluster_check_or_skip
dir=$(mktemp -d)
trap 'cl down >/dev/null 2>&1; rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }
wrong0() {  # LOG: the run ended 0 and reported #wrong 0
  grep -q "^# total #wrong: 0$" "$1" || { bad "$2: not exact"; cat "$1"; }
}

trace() {  # RANKS -> $dir/corpus-RANKS
  "$ztrace" corpus --text "$repo/tests/data/corpus-tiny.txt" -o "$dir/corpus-$1" -n "$1" -B 8 -D 16 -T 2 --row-level \
    >/dev/null || { echo "zen_trace failed"; exit 1; }
}

case $case_ in
exact)
  cl up 4 --rate 1gbit || exit 1
  trace 4
  for out in dense sparse; do
    cl run -- "$perf" --trace "$dir/corpus-4" --scheme all --output $out -n 2 -w 1 -c 1 >"$dir/log" 2>&1 ||
      bad "corpus trace, $out output: zen_perf exited $?"
    wrong0 "$dir/log" "corpus trace, $out output"
    grep -E "^ +[0-9]" "$dir/log" | awk '{print "  " $4, $6, $14}' | tr '\n' ';'
    echo
    # N not divisible by n or D-aligned sizes, index 0 and N-1 (the generator covers both ends)
    cl run -- "$perf" -b 300K -e 300K --row-width 3 -d 0.05 --scheme all --output $out -n 2 -w 1 -c 1 >"$dir/log" 2>&1 ||
      bad "synthetic, $out output: zen_perf exited $?"
    wrong0 "$dir/log" "synthetic, $out output"
  done
  ;;
hierarchical)
  cl up 4 --rate 1gbit --ranks-per-host 2 || exit 1
  trace 8
  for out in dense sparse; do
    cl run -- "$perf" --trace "$dir/corpus-8" --scheme hier_balanced,hier_allgather,balanced --node-size host \
      --output $out -n 2 -w 1 -c 1 >"$dir/log" 2>&1 || bad "hierarchical, $out output: zen_perf exited $?"
    wrong0 "$dir/log" "hierarchical, $out output"
    grep "bytes on rank 0 per call" "$dir/log"
    for s in hier_balanced hier_allgather; do
      line=$(grep "#   $s bytes on rank 0 per call" "$dir/log")
      [ -n "$line" ] || { bad "$s: no inside/across split printed"; continue; }
      read -r in_s x_s < <(sed -E 's/.*inside the node sent ([0-9]+) .*across nodes sent ([0-9]+) .*/\1 \2/' <<<"$line")
      [ "${in_s:-0}" -gt 0 ] && [ "${x_s:-0}" -gt 0 ] || bad "$s: bytes inside ($in_s) and across ($x_s) hosts must both be > 0"
    done
  done
  ;;
straggler)
  cl up 4 --rate 1gbit || exit 1
  args=(-b 4M -e 4M --row-width 16 -d 0.05 --scheme balanced,allgather,sparse_ps -n 3 -w 1 -c 1)
  cl run -- "$perf" "${args[@]}" >"$dir/even.txt" 2>&1 || bad "even links: zen_perf exited $?"
  wrong0 "$dir/even.txt" "even links"
  cl shape h3 10mbit
  cl run -- "$perf" "${args[@]}" >"$dir/slow.txt" 2>&1 || bad "straggler: zen_perf exited $?"
  wrong0 "$dir/slow.txt" "straggler"
  # The shaping took effect (a timing assertion would be flaky on a loaded machine: the slowdown is
  # printed, as zen_perf reports it, not asserted).
  cl status | grep -E "^h3 .*rate 10Mbit" >/dev/null || { bad "h3 is not shaped to 10 Mbit/s"; cl status; }
  awk 'FNR == 1 { f++ } /^ +[0-9]/ { t[f, $4] = $6; s[$4] = 1 }
       END { for (k in s) printf "  %s: %.0f us with even links, %.0f us with h3 at 1/100 the rate: %.1fx\n", k, t[1, k], t[2, k], t[2, k] / t[1, k] }' \
    "$dir/even.txt" "$dir/slow.txt"
  ;;
link_down)
  cl up 4 --rate 1gbit || exit 1
  tmo=2000
  cl run -- "$fault" --timeout-ms $tmo --seconds 120 >"$dir/log" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "running" "$dir/log" && break; sleep 0.1; done
  grep -q "running" "$dir/log" || { bad "the job did not start"; cat "$dir/log"; kill $job; exit 1; }
  sleep 1
  t_down=$(now_ms)
  cl link h3 down
  for _ in $(seq 300); do
    [ "$(grep -cE 'rank [012] on h[012] failed' "$dir/log")" -ge 3 ] && break
    sleep 0.1
  done
  cl link h3 up
  for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then bad "mpirun still running 60 s after the link came back"; kill -9 $job; fi
  wait $job
  echo "job exit $?"
  for r in 0 1 2; do
    line=$(grep -E "rank $r on h$r failed" "$dir/log" | head -n1)
    [ -n "$line" ] || { bad "rank $r did not fail"; continue; }
    at=$(sed -E 's/.* failed at ([0-9]+) .*/\1/' <<<"$line")
    echo "  rank $r: failed $((at - t_down)) ms after the link went down (timeout $tmo ms)"
    [ $((at - t_down)) -le $((2 * tmo)) ] || bad "rank $r failed $((at - t_down)) ms after the link went down (> 2x $tmo ms)"
    grep -qE "rank\(s\) 3 did not take part" <<<"$line" || bad "rank $r's error does not name rank 3: $line"
  done
  [ $fail = 0 ] || cat "$dir/log"
  ;;
host_killed)
  cl up 4 --rate 1gbit || exit 1
  cl run -- "$fault" --timeout-ms 600000 --seconds 120 >"$dir/log" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -q "running" "$dir/log" && break; sleep 0.1; done
  grep -q "running" "$dir/log" || { bad "the job did not start"; cat "$dir/log"; kill $job; exit 1; }
  sleep 1
  t_kill=$(now_ms)
  cl kill h3
  for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then bad "mpirun still running 60 s after h3 was killed (hang)"; kill -9 $job; fi
  wait $job
  rc=$?
  echo "  mpirun ended $(( $(now_ms) - t_kill )) ms after h3 was killed, exit $rc"
  [ $rc -ne 0 ] || bad "mpirun exited 0 although a host died"
  [ $fail = 0 ] || cat "$dir/log"
  ;;
*) echo "unknown case $case_"; exit 1 ;;
esac
[ $fail = 0 ] && echo "cluster_$case_: pass"
exit $fail
