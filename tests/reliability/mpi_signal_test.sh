#!/usr/bin/env bash
# SIGINT and SIGTERM to mpirun during a long run (zen_mpi_nb_faults: 4 ranks, 4 pending requests on
# two plans, every rank inside zen's calls): every rank must be gone within 5 s of the signal and no
# process of the job may outlive it (orphans): every process started under mpirun inherits a marker in
# its environment, and none may still run once the ranks are gone. A process counts as gone once it
# has exited: a zombie (state Z, waiting to be reaped by whoever inherited it) runs no more.
#   mpi_signal_test.sh MPIEXEC ZEN_MPI_NB_FAULTS
set -uo pipefail
mpiexec=$1 bin=$2
np=4
fail=0
bad() { echo "FAIL: $*"; fail=1; }
now_ms() { date +%s%3N; }
running() {  # PID: exists and is not a zombie
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
marked() {  # PIDs of running processes whose environment holds the marker
  local p
  for p in $(ls /proc | grep -E '^[0-9]+$'); do
    tr '\0' '\n' 2>/dev/null <"/proc/$p/environ" | grep -qx "ZEN_SIGNAL_TEST_MARK=$1" && running "$p" && echo "$p"
  done
}
for sig in INT TERM; do
  log=$(mktemp)
  mark="$$-$sig-$RANDOM"
  ZEN_SIGNAL_TEST_MARK=$mark "$mpiexec" -n $np "$bin" --seconds 120 --pending 4 >"$log" 2>&1 &
  job=$!
  for _ in $(seq 300); do [ "$(grep -c ' running ' "$log")" -ge $np ] && break; sleep 0.1; done
  [ "$(grep -c ' running ' "$log")" -ge $np ] || { bad "SIG$sig: the job did not start"; cat "$log"; kill -9 "$job"; continue; }
  pids=$(sed -nE 's/^zen_mpi_nb_faults: rank [0-9]+ pid ([0-9]+) running.*/\1/p' "$log" | tr '\n' ' ')
  sleep 1
  t0=$(now_ms)
  kill -s "$sig" "$job"
  gone=""
  for _ in $(seq 200); do
    alive=0
    kill -0 "$job" 2>/dev/null && alive=1
    for p in $pids; do running "$p" && alive=1; done
    [ $alive = 0 ] && { gone=$(( $(now_ms) - t0 )); break; }
    sleep 0.05
  done
  wait "$job" 2>/dev/null
  rc=$?
  left=""
  for p in $pids; do running "$p" && left="$left $p"; done
  sleep 0.2
  for p in $(marked "$mark"); do [[ " $left " == *" $p "* ]] || left="$left $p"; done
  if [ -n "$left" ]; then
    bad "SIG$sig: processes$left of the job still alive after the signal (orphans)"
    kill -9 $left 2>/dev/null
  else
    echo "SIG$sig to mpirun: mpirun (exit $rc) and ranks$(printf ' %s' $pids) gone after $gone ms"
    [ "$gone" -le 5000 ] || bad "SIG$sig: the job took $gone ms to end (> 5 s)"
  fi
  [ $fail = 0 ] || cat "$log"
  rm -f "$log"
done
[ $fail = 0 ] && echo "mpi_signal_test: pass"
exit $fail
