#!/usr/bin/env bash
# Long-running tools show progress on stderr only when asked or attached to a terminal: under ctest
# (stderr is a file) they stay quiet; ZEN_PROGRESS=1 forces one line per update, ZEN_PROGRESS=0 none.
#   progress_test.sh ZEN_TRACE ZEN_PERF
set -euo pipefail
trace=$1 perf=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset ZEN_PROGRESS
"$trace" synthetic -o "$tmp/a" -N 4096 -n 2 -T 3 >"$tmp/out" 2>"$tmp/err"
if grep -q "\[zen_trace\]" "$tmp/err"; then echo "FAIL: progress printed to a non-terminal"; cat "$tmp/err"; exit 1; fi
ZEN_PROGRESS=1 "$trace" synthetic -o "$tmp/b" -N 4096 -n 2 -T 3 >"$tmp/out" 2>"$tmp/err"
grep -q "\[zen_trace\] 3/3 (100%)" "$tmp/err" || { echo "FAIL: ZEN_PROGRESS=1 shows no progress"; cat "$tmp/err"; exit 1; }
if grep -q "zen_trace\]" "$tmp/out"; then echo "FAIL: progress went to stdout"; exit 1; fi
ZEN_PROGRESS=1 "$perf" --threads 2 -b 4K -e 16K -f 2 -n 2 -w 1 --scheme balanced >"$tmp/out" 2>"$tmp/err"
grep -q "\[zen_perf\] 3/3 (100%)" "$tmp/err" || { echo "FAIL: zen_perf shows no progress"; cat "$tmp/err"; exit 1; }
ZEN_PROGRESS=0 "$perf" --threads 2 -b 4K -e 16K -f 2 -n 2 -w 1 --scheme balanced >"$tmp/out" 2>"$tmp/err"
if grep -q "\[zen_perf\]" "$tmp/err"; then echo "FAIL: ZEN_PROGRESS=0 still shows progress"; exit 1; fi
echo "progress_test: pass"
