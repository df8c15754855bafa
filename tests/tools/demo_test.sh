#!/usr/bin/env bash
# scripts/demo.sh and what it stands on, as ctest cases:
#   reduced      the demo with 2 timed iterations on the built binaries (no deps, no build): it ends
#                with the three summary lines after the line naming the table, JSON and PNG, every
#                result is exact (#wrong 0), auto's decision calls were all untimed, and where network
#                namespaces can be made the 4-host cluster part ran and left no namespace behind.
#                Needs the Brown corpus (scripts/fetch_corpus.sh; exit 77 without it, 1 under
#                ZEN_REQUIRE_TEST_INPUTS=1 as in CI).
#   interrupted  Ctrl-C (SIGINT to the demo's process group, as a terminal sends it) while zen_perf
#                runs on the cluster: the demo ends and removes the cluster: no namespace, no state,
#                no zen_perf left. Exit 77 where network namespaces cannot be made.
#   auto_settle  zen_perf (loopback) calls auto untimed until its first decision is over and counts its
#                decision calls apart; with --auto-settle 0 and no warm-up they are counted as timed.
# Each case has a cluster of its own names (not the cluster_* tests' nor scripts/cluster.sh's defaults).
#   demo_test.sh CASE REPO BIN_DIR
set -uo pipefail
case_=$1 repo=$2 bin=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }
py=/usr/bin/python3
[ -x $py ] || py=python3

corpus() {
  bash "$repo/scripts/fetch_corpus.sh" >/dev/null 2>"$tmp/fetch.err" || {
    cat "$tmp/fetch.err"
    if [ "${ZEN_REQUIRE_TEST_INPUTS:-0}" != 0 ]; then
      echo "FAIL: no Brown corpus (scripts/fetch_corpus.sh failed: npm or network); ZEN_REQUIRE_TEST_INPUTS is set: a missing input is a failure"
      exit 1
    fi
    echo "SKIP: no Brown corpus (scripts/fetch_corpus.sh failed: npm or network)"
    exit 77
  }
}
namespaces_left() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^$1-" || true; }

case $case_ in
reduced)
  corpus
  export ZEN_DEMO_CLUSTER_PREFIX=zendt ZEN_DEMO_CLUSTER_SUBNET=10.234.0 ZEN_DEMO_CLUSTER_STATE=/run/zen-cluster-demo-test
  cluster=1
  ZEN_CLUSTER_PREFIX=zendt bash "$repo/scripts/cluster.sh" check >/dev/null 2>&1 || cluster=0
  ZEN_DEMO_BUILD=0 ZEN_DEMO_BIN="$bin" ZEN_DEMO_OUT="$tmp/out" ZEN_DEMO_ITERS=2 ZEN_DEMO_WARMUP=1 \
    bash "$repo/scripts/demo.sh" >"$tmp/log" 2>&1
  rc=$?
  cat "$tmp/log"
  [ $rc = 0 ] || bad "demo.sh exited $rc"
  mapfile -t last < <(tail -n 4 "$tmp/log")
  num='[0-9]+\.[0-9]+x'
  if [ $cluster = 1 ]; then
    sets="$num \(4 hosts, 1 Gbit/s\), $num \(shared memory, 4 ranks\)"
    sets1=$sets
  else
    sets="$num \(shared memory, 4 ranks\)"
    sets1="$sets \(cluster part skipped\)"
    echo "(no network namespaces here: the cluster part was skipped, as it should)"
  fi
  [[ ${last[0]:-} =~ ^"== results: full table ".*results\.md,\ JSON\ .*demo\.json,\ plot\ .*demo\.png ]] ||
    bad "the line naming the table, JSON and PNG is missing: '${last[0]:-}'"
  [[ ${last[1]:-} =~ ^zen\ balanced\ vs\ MPI_Allreduce:\ $sets1$ ]] || bad "summary line 1: '${last[1]:-}'"
  [[ ${last[2]:-} =~ ^zen\ balanced\ vs\ hand-written\ MPI_Allgatherv:\ $sets$ ]] ||
    bad "summary line 2: '${last[2]:-}'"
  [[ ${last[3]:-} =~ ^auto\ chose\ [a-z_]+\ on\ .*(within\ [0-9]+\ %|as\ fast\ as).*untimed$ ]] ||
    bad "summary line 3: '${last[3]:-}'"
  for f in results.md demo.json demo.png shm.txt; do [ -s "$tmp/out/$f" ] || bad "$f not written"; done
  [ "$(head -c 4 "$tmp/out/demo.png" | od -An -c | tr -d ' ')" = '211PNG' ] || bad "demo.png is not a PNG"
  for f in "$tmp"/out/shm.txt "$tmp"/out/cluster.txt; do
    [ -f "$f" ] || continue
    grep -q "^# total #wrong: 0$" "$f" || bad "$(basename "$f"): not exact"
  done
  $py - "$tmp/out/demo.json" "$cluster" <<'EOF' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
want = ["cluster", "shm"] if sys.argv[2] == "1" else ["shm"]
ok = True
def bad(m):
    global ok
    print("FAIL: demo.json: " + m)
    ok = False
if [s["key"] for s in d["settings"]] != want:
    bad(f"settings {[s['key'] for s in d['settings']]}, expected {want}")
if d["total_wrong"] != 0:
    bad(f"total_wrong {d['total_wrong']}")
for s in d["settings"]:
    for k, r in s["rows"].items():
        if r["wrong"] != 0:
            bad(f"{s['key']} {k}: {r['wrong']} wrong")
    for k in ["balanced", "allgather", "sparcml", "sparse_ps", "omnireduce", "dense_native", "dense", "auto",
              "mpi_allreduce", "mpi_allgatherv"]:
        if k not in s["rows"]:
            bad(f"{s['key']}: scheme {k} missing")
    a = s["rows"]["auto"]
    dec = a.get("decision", {})
    if dec.get("calls", 0) < 1 or dec.get("timed", -1) != 0:
        bad(f"{s['key']}: auto's decision calls {dec}: expected >= 1, none timed")
    if len(a.get("ran", {})) != 1 or sum(a["ran"].values()) != s["iters"]:
        bad(f"{s['key']}: auto's timed calls ran {a.get('ran')}: expected one scheme, {s['iters']} calls")
if len(d["lines"]) != 3:
    bad(f"{len(d['lines'])} summary lines")
sys.exit(0 if ok else 1)
EOF
  left=$(namespaces_left zendt)
  [ -z "$left" ] || bad "namespaces left behind: $left"
  [ ! -e /run/zen-cluster-demo-test ] || bad "cluster state left behind: /run/zen-cluster-demo-test"
  ;;
interrupted)
  corpus
  export ZEN_DEMO_CLUSTER_PREFIX=zendi ZEN_DEMO_CLUSTER_SUBNET=10.235.0 ZEN_DEMO_CLUSTER_STATE=/run/zen-cluster-demo-int
  ZEN_CLUSTER_PREFIX=zendi bash "$repo/scripts/cluster.sh" check >/dev/null 2>"$tmp/check.err" || {
    rc=$?
    cat "$tmp/check.err"
    [ $rc = 77 ] && echo "SKIP: no network namespaces here" && exit 77
    exit 1
  }
  # Many iterations on the cluster: the demo is still in its cluster part when it is interrupted.
  ZEN_DEMO_BUILD=0 ZEN_DEMO_BIN="$bin" ZEN_DEMO_OUT="$tmp/out" ZEN_DEMO_ITERS=1 ZEN_DEMO_CLUSTER_ITERS=100000 ZEN_DEMO_WARMUP=0 \
    setsid bash "$repo/scripts/demo.sh" >"$tmp/log" 2>&1 &
  job=$!
  for _ in $(seq 1200); do
    [ -f /run/zen-cluster-demo-int/config ] && pgrep -f -- "--json $tmp/out/cluster.json" >/dev/null && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  sleep 2  # inside zen_perf's timed loop
  if ! [ -f /run/zen-cluster-demo-int/config ] || ! kill -0 $job 2>/dev/null; then
    bad "the demo did not reach its cluster part"
    cat "$tmp/log"
    kill -TERM -- -$job 2>/dev/null
  else
    echo "cluster up, zen_perf running on it: SIGINT to the demo's process group"
    kill -INT -- -$job
  fi
  for _ in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  if kill -0 $job 2>/dev/null; then bad "the demo still runs 60 s after SIGINT"; kill -KILL -- -$job; fi
  wait $job
  rc=$?
  echo "demo exit status $rc"
  tail -n 5 "$tmp/log"
  [ $rc != 0 ] || bad "the demo exited 0 although it was interrupted"
  left=$(namespaces_left zendi)
  [ -z "$left" ] || bad "namespaces left behind: $left"
  [ ! -e /run/zen-cluster-demo-int ] || bad "cluster state left behind: /run/zen-cluster-demo-int"
  if pgrep -f -- "--json $tmp/out/cluster.json" >/dev/null; then
    bad "zen_perf processes left behind: $(pgrep -f -- "--json $tmp/out/cluster.json" | tr '\n' ' ')"
    kill -KILL $(pgrep -f -- "--json $tmp/out/cluster.json") 2>/dev/null
  fi
  # Nothing of this case may stay behind even if the demo failed to clean up.
  ZEN_CLUSTER_PREFIX=zendi ZEN_CLUSTER_STATE=/run/zen-cluster-demo-int bash "$repo/scripts/cluster.sh" down >/dev/null 2>&1
  ;;
auto_settle)
  args=(--threads 3 -b 300K -e 300K --row-width 4 -d 0.05 --scheme balanced,allgather,auto -n 3 -c 1
        --auto-explore 4 --auto-budget 100)  # wide limits: this input's candidates are then measured
  "$bin/zen_perf" "${args[@]}" -w 1 --json "$tmp/settled.json" >"$tmp/settled.txt" 2>&1 || bad "zen_perf (settled) exited $?"
  "$bin/zen_perf" "${args[@]}" -w 0 --auto-settle 0 --json "$tmp/raw.json" >"$tmp/raw.txt" 2>&1 || bad "zen_perf (--auto-settle 0) exited $?"
  grep "decided in" "$tmp/settled.txt" "$tmp/raw.txt"
  $py - "$tmp/settled.json" "$tmp/raw.json" <<'EOF' || fail=1
import json, sys
def auto(p):
    return [r for r in json.load(open(p))["rows"] if r["scheme"] == "auto"][0]
s, r = auto(sys.argv[1]), auto(sys.argv[2])
ok = True
# Settled: the statistics call and the candidates' measurement (this input's model leaves several
# candidates close: more decision calls than the one warm-up round), none of them timed; the 3 timed
# calls all ran the chosen scheme.
if s["decision"]["calls"] < 2 or s["decision"]["timed"] != 0 or list(s["ran"].values()) != [3]:
    print(f"FAIL: settled: decision {s['decision']}, ran {s['ran']}"); ok = False
# Not settled, no warm-up: the first timed call gathers the statistics, so it is a timed decision call.
if r["decision"]["timed"] < 1 or r["decision"]["timed"] != r["decision"]["calls"]:
    print(f"FAIL: --auto-settle 0 -w 0: decision {r['decision']} (expected every decision call timed)"); ok = False
sys.exit(0 if ok else 1)
EOF
  ;;
*) echo "unknown case $case_"; exit 1 ;;
esac
[ $fail = 0 ] && echo "demo_$case_: pass"
exit $fail
