#!/usr/bin/env bash
# examples/python/ddp_embedding.py at n = 2 on tests/data/corpus-tiny.txt: Gloo and zen variants agree
# (--check), the CSV and PNG are written, and where the C++ example is built its loss per interval is
# the Python example's (the same model, corpus, vocabulary order and data order).
#   example_test.sh MPIEXEC PYTHON SOURCE_DIR [TRAIN_EMBEDDING]
set -uo pipefail
mpiexec=$1 py=$2 src=$3 te=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(--corpus "$src/tests/data/corpus-tiny.txt" --steps 20 --batch 64 --dim 16 --interval 5)
if ! "$py" -c "import torch" 2>/dev/null; then echo "SKIP: torch is not importable by $py"; exit 0; fi
"$mpiexec" -n 2 "$py" "$src/examples/python/ddp_embedding.py" "${args[@]}" --warmup 2 \
  --compare gloo,zen:balanced,zen:allgather,gloo-dense --check --out "$tmp/py" >"$tmp/py.log" 2>&1
rc=$?
cat "$tmp/py.log"
[ $rc = 0 ] || { echo "FAIL: ddp_embedding.py exited $rc"; exit 1; }
[ -s "$tmp/py/ddp_embedding.csv" ] || { echo "FAIL: no CSV"; exit 1; }
if command -v gnuplot >/dev/null; then [ -s "$tmp/py/ddp_embedding.png" ] || { echo "FAIL: no PNG"; exit 1; }; fi
if [ -n "$te" ]; then
  "$mpiexec" -n 2 "$te" "${args[@]}" --sync dense --out "$tmp/cpp" >"$tmp/cpp.log" 2>&1 ||
    { cat "$tmp/cpp.log"; echo "FAIL: train_embedding"; exit 1; }
  "$py" - "$tmp/cpp/train_embedding.csv" "$tmp/py/ddp_embedding.csv" <<'PY' || exit 1
import csv, sys
cpp = [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(open(sys.argv[1]))]
py = [(int(r["step"]), float(r["loss"])) for r in csv.DictReader(open(sys.argv[2])) if r["variant"] == "gloo"]
assert cpp and [s for s, _ in cpp] == [s for s, _ in py], (cpp, py)
worst = max(abs(a - b) / abs(b) for (_, a), (_, b) in zip(py, cpp))
print(f"losses per interval, Python example vs train_embedding (C++): max rel. diff {worst:.2e} over {len(cpp)} intervals")
sys.exit(0 if worst <= 1e-5 else 1)
PY
fi
echo "example_test: pass"
