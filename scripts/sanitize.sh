#!/usr/bin/env bash
# ASan + UBSan build (preset "sanitize" -> build-asan, ZEN_SANITIZE=ON) of the CPU configuration and
# its ctest suite. Tests labelled "slow" (e.g. the 10^4-case differential sweep; a smaller sweep runs
# instead) and "fuzz" are excluded to keep this within ~20 min on 2 cores. Any sanitizer report fails
# the test that triggered it (halt_on_error, -fno-sanitize-recover=undefined).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
jobs=${ZEN_JOBS:-$ZEN_NPROC}
asan=${ZEN_ASAN_OPTIONS:-halt_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/reliability/lsan.supp:print_suppressions=0}
cmake --preset sanitize -DZEN_BUILD_EXAMPLES=OFF
cmake --build build-asan -j "$jobs"
status=0
# JUnit records of what ran (scripts/test.sh's CI mode runs the rest in the plain build); stale ones
# from an earlier run would hide tests, so they go first.
rm -f build-asan/junit-loopback.xml build-asan/junit-mpi.xml
# Everything but the MPI tests, with leak checking.
ASAN_OPTIONS="detect_leaks=1:$asan" ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 900 \
  --output-junit junit-loopback.xml -LE "slow|fuzz|gpu|mpi|python" || status=1
# The MPI tests, in one pass without leak checking: many end ranks on purpose (kills, aborts). Those
# labelled "lsan" (the soak, out of memory mid-call) turn it back on for themselves (their
# ENVIRONMENT_MODIFICATION appends detect_leaks=1): zen exempts what Open MPI allocates inside
# MPI_Init_thread / MPI_Finalize and keeps its plugins loaded, so the rest of Open MPI's allocations
# are matched by library name (tests/reliability/lsan.supp; docs/reliability.md, "Leak checking").
ASAN_OPTIONS="detect_leaks=0:$asan" ctest --test-dir build-asan --output-on-failure -j "$jobs" --timeout 900 \
  --output-junit junit-mpi.xml -L mpi -LE "slow|fuzz|gpu|python" || status=1
exit $status
