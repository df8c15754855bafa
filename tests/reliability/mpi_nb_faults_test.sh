#!/usr/bin/env bash
# A rank SIGKILLed while every rank holds --pending 4 requests on two plans (zen_mpi_nb_faults), at
# n = 3 (rank 1 killed) and n = 4 (rank 3 killed), communicator timeout 1 s. With Open MPI's default
# mpirun ends the whole job at once when a rank dies (mpi_rank_failure_*); here it runs with
# orte_enable_recovery so that the survivors go on and zen's own detection is what they see. Every
# survivor must: see every one of its >= 3 pending requests fail within 2x the timeout of the kill,
# each error naming the killed rank; a later call fail at once (< 100 ms); destroying its plans and
# communicator end within 3 s. The job must end by itself (no hang).
#   mpi_nb_faults_test.sh MPIEXEC ZEN_MPI_NB_FAULTS
set -uo pipefail
mpiexec=$1 bin=$2
tmo=1000
fail=0
bad() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }
run() {  # NP VICTIM
  local np=$1 victim=$2 log job pid t_kill
  log=$(mktemp)
  timeout 90 "$mpiexec" --mca orte_enable_recovery 1 -n "$np" "$bin" --timeout-ms $tmo --seconds 60 --pending 4 \
    --victim "$victim" >"$log" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ "$(grep -c ' running ' "$log")" -ge "$np" ] && break; sleep 0.1; done
  [ "$(grep -c ' running ' "$log")" -ge "$np" ] || { bad "n=$np: the job did not start"; cat "$log"; kill "$job"; rm -f "$log"; return; }
  sleep 0.5
  pid=$(sed -nE "s/^zen_mpi_nb_faults: rank $victim pid ([0-9]+) running.*/\1/p" "$log")
  t_kill=$(now_ms)
  kill -9 "$pid"
  for _ in $(seq 200); do [ "$(grep -c ' pending ' "$log")" -ge $((np - 1)) ] && break; sleep 0.1; done
  for _ in $(seq 300); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$job" 2>/dev/null; then bad "n=$np: mpirun still running 30 s after the kill"; kill -9 "$job"; fi
  wait "$job"
  echo "n=$np, rank $victim killed, mpirun exit $?"
  for r in $(seq 0 $((np - 1))); do
    [ "$r" = "$victim" ] && continue
    line=$(grep -E "^zen_mpi_nb_faults: rank $r on " "$log" | head -n1)
    [ -n "$line" ] || { bad "n=$np: rank $r reported nothing"; continue; }
    read -r pend failed first last named nof later destroy < <(sed -E \
      's/.*pending ([0-9]+), failed ([0-9]+), first at ([0-9]+) last at ([0-9]+) \(epoch ms\), named -?[0-9]+ in ([0-9]+)\/([0-9]+), later call failed in (-?[0-9.]+) ms, destroy ([0-9]+) ms.*/\1 \2 \3 \4 \5 \6 \7 \8/' <<<"$line")
    echo "  rank $r: $pend pending, $failed failed $((first - t_kill))..$((last - t_kill)) ms after the kill, $named named rank $victim, later call failed in $later ms, destroy $destroy ms"
    [ "$pend" -ge 3 ] || bad "n=$np rank $r: only $pend requests were pending"
    [ "$failed" = "$pend" ] || bad "n=$np rank $r: $failed of $pend pending requests failed"
    [ "$named" = "$failed" ] || bad "n=$np rank $r: only $named of $failed errors name rank $victim: $line"
    [ $((last - t_kill)) -le $((2 * tmo)) ] || bad "n=$np rank $r: last pending request failed $((last - t_kill)) ms after the kill (> 2x $tmo ms)"
    awk -v l="$later" 'BEGIN { exit !(l >= 0 && l < 100) }' || bad "n=$np rank $r: the later call took $later ms to fail"
    [ "$destroy" -le 3000 ] || bad "n=$np rank $r: destroying took $destroy ms"
  done
  if grep -q WRONG "$log"; then bad "n=$np: a wrong result"; fi
  [ $fail = 0 ] || cat "$log"
  rm -f "$log"
}
run 3 1
run 4 3
[ $fail = 0 ] && echo "mpi_nb_faults_test: pass"
exit $fail
