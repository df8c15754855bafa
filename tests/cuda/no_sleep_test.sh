#!/usr/bin/env bash
# The device path waits without sleeping (docs/gpu.md, "Hot spots designed out"): no object of
# zen_cuda calls a sleep function (nanosleep, usleep, sleep, clock_nanosleep, std::this_thread's
# __sleep_for); stream waits are cudaStreamSynchronize or polls that yield. Checked on the built
# library's undefined symbols, so an inlined std::this_thread::sleep_for is seen too.
#   no_sleep_test.sh LIBZEN_CUDA
set -uo pipefail
lib=$1
syms=$(nm -C --undefined-only "$lib" 2>/dev/null) || { echo "FAIL: cannot read $lib"; exit 1; }
[ -n "$syms" ] || { echo "FAIL: no undefined symbols read from $lib"; exit 1; }
grep -q 'cudaStreamSynchronize' <<<"$syms" || { echo "FAIL: $lib does not call cudaStreamSynchronize: wrong library?"; exit 1; }
hits=$(grep -E '(^|[^a-z_])(nanosleep|clock_nanosleep|usleep|sleep|__sleep_for)([^a-z_]|$)|this_thread::__sleep_for' <<<"$syms" | sort -u)
if [ -n "$hits" ]; then echo "FAIL: $lib sleeps:"; echo "$hits"; exit 1; fi
echo "no_sleep_test: $(wc -l <<<"$syms") undefined symbols of $(basename "$lib"), none a sleep"
