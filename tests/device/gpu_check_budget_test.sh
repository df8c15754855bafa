#!/usr/bin/env bash
# scripts/gpu_check.sh --run stays within its time budget by construction (no GPU needed): on a fake
# package whose test binaries and benchmark hang and ignore SIGTERM (as a process stuck in the
# driver may), a run with ZEN_CHECK_BUDGET=B ends within B + GRACE (+ 3 s of slack; here B = 16, GRACE = 1),
# cuts the first suite's limit so that the benchmark keeps its share (ZEN_BENCH_TIMEOUT), records the
# first suite as timed out and the rest as not run, and leaves a valid summary saying ok false.
#   gpu_check_budget_test.sh SOURCE_DIR
set -uo pipefail
src=$1 budget=16 bench=3 grace=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/pkg"
for b in test_cuda test_capi_gpu zen_gpu_bench; do
  cat >"$tmp/pkg/$b" <<'BIN'
#!/usr/bin/env bash
case "$*" in *--gtest_list_tests*) printf 'Hangs.\n  A\nAlsoHangs.\n  B\n'; exit 0 ;; esac
trap '' TERM          # ignored, and inherited as ignored through exec
exec sleep 1000
BIN
  chmod +x "$tmp/pkg/$b"
done
t0=$(date +%s)
ZEN_NCCL_LIB=/nonexistent ZEN_CHECK_GRACE=$grace ZEN_CHECK_BUDGET=$budget ZEN_BENCH_TIMEOUT=$bench ZEN_SUITE_TIMEOUT=120 \
  bash "$src/scripts/gpu_check.sh" --run "$tmp/pkg" "$tmp/out" >"$tmp/log" 2>&1
rc=$? took=$(( $(date +%s) - t0 ))
py=$(command -v /usr/bin/python3 || command -v python3)
"$py" - "$tmp/out/gpu_check.json" "$rc" "$took" "$budget" "$grace" "$bench" <<'PY'
import json, sys
path, rc, took, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
grace, bench = int(sys.argv[5]), int(sys.argv[6])
d = json.load(open(path))
problems = []
if took > budget + grace + 3: problems.append("took %d s with a budget of %d s" % (took, budget))
if rc == 0 or d["ok"]: problems.append("the run passed")
s = d["suites"]
if len(s) != 4: problems.append("%d suites recorded, 4 listed" % len(s))
elif not s[0].get("timed_out"): problems.append("the first suite did not time out: %s" % s[0])
elif s[0]["seconds"] > budget - bench + 1: problems.append("the first suite ran %d s: not cut to leave the benchmark %d s" % (s[0]["seconds"], bench))
elif not all(x.get("not_run") for x in s[1:]): problems.append("suites ran past the budget: %s" % s[1:])
if d["bench_ok"]: problems.append("the hanging benchmark passed")
print("gpu_check_budget_test: %d s for a budget of %d s; first suite timed out, %d not run" % (took, budget, len(s) - 1)
      if not problems else "FAIL: " + "; ".join(problems))
sys.exit(1 if problems else 0)
PY
ok=$?
[ $ok = 0 ] || tail -20 "$tmp/log"
# No process of the fake package may outlive the run.
if pgrep -f "$tmp/pkg" >/dev/null; then echo "FAIL: a package process outlived the run"; pkill -KILL -f "$tmp/pkg"; ok=1; fi
exit $ok
