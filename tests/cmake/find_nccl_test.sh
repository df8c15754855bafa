#!/usr/bin/env bash
# cmake/ZenFindNccl.cmake on fake layouts (no CUDA needed): pip's nvidia-nccl wheel
# (site-packages/nvidia/nccl/{include,lib} with a bare libnccl.so.2, found through python3) wins
# over the CUDA toolkit, NCCL_HOME wins over both, and ZEN_WITH_NCCL=ON without NCCL anywhere is a
# configuration error (AUTO: a warning).
#   find_nccl_test.sh SOURCE_DIR CMAKE
set -uo pipefail
src=$1 cmake=${2:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
mkdir -p "$tmp/site/nvidia/nccl/include" "$tmp/site/nvidia/nccl/lib" "$tmp/cuda/include" "$tmp/cuda/lib64" \
         "$tmp/home/include" "$tmp/home/lib" "$tmp/none"
for d in site/nvidia/nccl cuda home; do touch "$tmp/$d/include/nccl.h"; done
touch "$tmp/site/nvidia/nccl/lib/libnccl.so.2" "$tmp/home/lib/libnccl.so.2"
touch "$tmp/cuda/lib64/libnccl.so.2" && ln -s libnccl.so.2 "$tmp/cuda/lib64/libnccl.so"
python=$(command -v /usr/bin/python3 || command -v python3)
run() {  # run NAME [env...] -- [cmake -D args...]
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  rm -rf "$tmp/b"
  env -u NCCL_HOME "${envs[@]}" "$cmake" -S "$src/tests/cmake/find_nccl" -B "$tmp/b" -DZEN_SOURCE_DIR="$src" \
    -DZEN_NCCL_PYTHON="$python" -DZEN_NCCL_CUDA_DIRS="$tmp/cuda/include;$tmp/cuda/lib64" "$@" >"$tmp/$name.log" 2>&1
}
expect_lib() {  # NAME EXPECTED_LIB
  local got
  got=$(sed -n 's/.*zen-find-nccl: found=ON lib=\([^ ]*\) .*/\1/p' "$tmp/$1.log")
  if [ "$got" != "$2" ]; then echo "FAIL: $1: found '$got', expected $2"; cat "$tmp/$1.log"; fail=1
  else echo "$1: $got"; fi
}
run toolkit -- ; expect_lib toolkit "$tmp/cuda/lib64/libnccl.so"
run pip PYTHONPATH="$tmp/site" -- ; expect_lib pip "$tmp/site/nvidia/nccl/lib/libnccl.so.2"
run home PYTHONPATH="$tmp/site" NCCL_HOME="$tmp/home" -- ; expect_lib home "$tmp/home/lib/libnccl.so.2"
if run missing_on -- -DZEN_NCCL_CUDA_DIRS="$tmp/none" -DZEN_WITH_NCCL=ON; then
  echo "FAIL: ZEN_WITH_NCCL=ON without NCCL configured"; cat "$tmp/missing_on.log"; fail=1
elif ! grep -q "ZEN_WITH_NCCL=ON asks for it" "$tmp/missing_on.log"; then
  echo "FAIL: the error does not say why"; cat "$tmp/missing_on.log"; fail=1
else echo "missing_on: configuration error, as asked"; fi
if ! run missing_auto -- -DZEN_NCCL_CUDA_DIRS="$tmp/none" -DZEN_WITH_NCCL=AUTO || ! grep -q "found=OFF" "$tmp/missing_auto.log"; then
  echo "FAIL: ZEN_WITH_NCCL=AUTO without NCCL"; cat "$tmp/missing_auto.log"; fail=1
else echo "missing_auto: configured without NCCL"; fi
exit $fail
