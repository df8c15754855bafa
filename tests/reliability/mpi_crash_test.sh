#!/usr/bin/env bash
# Usage: mpi_crash_test.sh MPIEXEC BINARY MODE NP
# Passes when the job ends with a non-zero status (not the 124 of `timeout`) in time; for --mode hang,
# the surviving ranks' error must name rank 1. In time: hang and stuck run at a 1 s timeout, detected
# within 1.5 s (timeout + presence check) and 1.25 s (watchdog), so the job must end within 10 s
# (the rest is mpirun's start and teardown: 2.3-3.3 s in all on a loaded 2-core machine); crash and
# exit are ended by mpirun, not by zen's 60 s timeout, so within 20 s.
set -u
mpiexec=$1 bin=$2 mode=$3 np=$4
log=$(mktemp)
start=$(date +%s%N)
timeout 90 "$mpiexec" -n "$np" "$bin" --mode "$mode" >"$log" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "mode=$mode np=$np exit=$rc ms=$ms"
status=0
if [ "$rc" -eq 0 ]; then echo "FAIL: the job exited 0 although rank 1 failed"; status=1; fi
if [ "$rc" -eq 124 ]; then echo "FAIL: the job hung (killed by timeout after 90 s)"; status=1; fi
case $mode in hang|stuck) bound=10000 ;; *) bound=20000 ;; esac
if [ "$ms" -gt "$bound" ]; then echo "FAIL: took $ms ms (bound $bound ms)"; status=1; fi
if [ "$mode" = hang ] && ! grep -q "peer 1" "$log"; then echo "FAIL: the error does not name rank 1"; status=1; fi
# stuck: the watchdog's message (rank 1 stopped inside the blocking call), or the timeout naming
# rank 1 (stopped in the cancellable handshake).
if [ "$mode" = stuck ] && ! grep -Eq "did not finish within 1000 ms|peer 1" "$log"; then
  echo "FAIL: neither the watchdog's message nor a timeout naming rank 1"; status=1
fi
grep -c "did not finish within" "$log" | sed 's/^/watchdog messages: /'
[ $status -ne 0 ] && cat "$log"
rm -f "$log"
exit $status
