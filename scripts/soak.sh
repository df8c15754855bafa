#!/usr/bin/env bash
# Soak: hours of calls without growth (docs/reliability.md, "Soak"). Runs zen_soak under
# `mpirun -np 4` for MINUTES (default 2; fractions allowed): a seeded random mix of every scheme,
# both outputs, 1 KB .. 64 MB tensors, every dtype and index width, blocking and non-blocking calls,
# plans created and destroyed, sub-communicators split and freed, every result checked exactly.
# Every rank's RSS, heap in use, open descriptors and threads are sampled every few seconds; the run
# fails on any wrong result, on growth after the warm-up (every scheme at the largest size, one request
# and three, then a tenth of the run; growth: any descriptor or thread more, heap in use more
# than 1 MiB or RSS more than 16 MiB above the warm-up maximum) and on a hang (a call past the
# communicator timeout fails the job; the whole run is killed 5 minutes after its end time).
# The ranks run with MALLOC_ARENA_MAX=1 unless the caller sets it: with glibc's per-thread arenas the
# free memory kept in the progress and pool threads' arenas grows RSS by tens of MiB over thousands of
# calls while the heap in use stays flat (allocator retention, not a leak; docs/reliability.md "Soak").
# A step's requests hold at most --inflight-mb MB of sparse input per rank (default half of --max-mb):
# at --max-mb 64 a rank peaked at about 1 GiB (VmHWM; allgather holds every rank's input).
#   scripts/soak.sh [MINUTES] [zen_soak options: --seed S --max-mb M --inflight-mb I --sample-s S ...]
# Writes $ZEN_SOAK_OUT (default build/soak/): soak.csv (t_s, calls, bytes, rank, rss_kib, fds,
# threads, heap_kib, free_kib), soak.log, and soak.png (RSS / heap in use / descriptors / threads per
# rank over time) where gnuplot exists.
# ZEN_SOAK_BIN: the zen_soak binary (default build/bin/zen_soak; build it with
# `cmake --build build --target zen_soak`).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
min=${1:-2}
(($#)) && shift
bin=${ZEN_SOAK_BIN:-$repo/build/bin/zen_soak}
out=${ZEN_SOAK_OUT:-$repo/build/soak}
[[ -x $bin ]] || { echo "soak.sh: $bin not found: cmake --preset cpu && cmake --build build --target zen_soak" >&2; exit 2; }
secs=$(awk -v m="$min" 'BEGIN { s = int(m * 60 + 0.5); if (s < 1) exit 1; print s }') ||
  { echo "soak.sh: MINUTES must be a positive number, not '$min'" >&2; exit 2; }
# shellcheck source=env.sh
source "$repo/scripts/env.sh"
mkdir -p "$out"
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-1}
echo "soak.sh: $secs s under mpirun -np 4, MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX (samples in $out/soak.csv)"
set +e
start=$SECONDS
timeout -k 10 $((secs + 300)) mpirun -x MALLOC_ARENA_MAX -np 4 "$bin" --seconds "$secs" --csv "$out/soak.csv" "$@" 2>&1 | tee "$out/soak.log"
rc=${PIPESTATUS[0]}
set -e
# 124 / 137 also come from mpirun when a rank was killed (e.g. SIGKILL from the kernel's OOM
# killer): only a run that lasted past the limit is a hang.
if ((rc != 0 && SECONDS - start >= secs + 300)); then
  echo "soak.sh: FAIL: the run did not end within 5 minutes of its end time (a hang)"
elif ((rc > 128)); then
  echo "soak.sh: FAIL: exit status $rc after $((SECONDS - start)) s: a rank ended by signal $((rc - 128))" \
    "(9 without a hang: the OOM killer, see dmesg)"
fi
if command -v gnuplot >/dev/null && [[ -s $out/soak.csv ]]; then
  gnuplot <<GP || echo "soak.sh: gnuplot failed (no plot)"
set terminal pngcairo size 1200,1200 font ",10"
set output "$out/soak.png"
set datafile separator ","
set multiplot layout 4,1 title "zen soak: 4 ranks, $secs s (every sample after the plans were dropped and free heap trimmed)"
set key outside right
set xlabel "time (s)"
set ylabel "RSS (MiB)"
plot for [r=0:3] "$out/soak.csv" using 1:(\$4 == r ? \$5 / 1024 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title sprintf("rank %d", r)
set ylabel "heap in use (MiB)"
plot for [r=0:3] "$out/soak.csv" using 1:(\$4 == r ? \$8 / 1024 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title sprintf("rank %d", r)
set ylabel "open descriptors"
plot for [r=0:3] "$out/soak.csv" using 1:(\$4 == r ? \$6 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title sprintf("rank %d", r)
set ylabel "threads"
plot for [r=0:3] "$out/soak.csv" using 1:(\$4 == r ? \$7 : 1/0) every ::1 with linespoints pt 7 ps 0.4 title sprintf("rank %d", r)
unset multiplot
GP
  [[ -s $out/soak.png ]] && echo "soak.sh: plot $out/soak.png"
fi
exit "$rc"
