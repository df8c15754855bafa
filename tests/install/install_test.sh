#!/usr/bin/env bash
# zen installs like any library: `cmake --install` into a temporary prefix, then two consumers
# built only against that prefix -- a C++ CMake project (find_package(zen CONFIG) -> zen::zen, and
# zen::zen_static, and the fl component) and a C program compiled with `pkg-config --cflags --libs zen` -- each run under
# mpirun at n = 2 and checked (exact sums, version of the headers == version of the library).
# With PYTHON, also the Python package: `import zen` from the prefix's site-packages directory that
# the install printed, and an offline `pip install ./python` into a venv.
#   install_test.sh BUILD_DIR SOURCE_DIR MPIEXEC [TORCH_BUILT=ON|OFF] [PYTHON]
set -uo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) mpiexec=$3 torch=${4:-OFF} py=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail=0
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in include/zen/zen.h include/zen/version.h lib/libzen.so lib/libzen_core.a lib/cmake/zen/zenConfig.cmake \
         lib/pkgconfig/zen.pc bin/zen_perf bin/zen_trace bin/zen_orbit lib/libzen_orbit.a include/zen/fl/sim/learner.hpp; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; fail=1; }
done
# Nothing of the source or build tree may leak into the installed package.
if grep -rqE "$src|$build" "$prefix/lib/cmake/zen" "$prefix/lib/pkgconfig"; then
  echo "FAIL: the installed package refers to the source or build tree:"; grep -rnE "$src|$build" "$prefix/lib/cmake/zen" "$prefix/lib/pkgconfig"
  fail=1
fi

# 1. CMake consumer.
if cmake -S "$src/tests/install/consumer_cpp" -B "$tmp/cpp" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
     >"$tmp/cpp.log" 2>&1 && cmake --build "$tmp/cpp" >>"$tmp/cpp.log" 2>&1; then
  for exe in consumer consumer_static; do
    if ! "$mpiexec" -n 2 "$tmp/cpp/$exe" >"$tmp/run.log" 2>&1; then echo "FAIL: $exe under mpirun -n 2:"; cat "$tmp/run.log"; fail=1
    else echo "$exe: $(grep consumer_cpp "$tmp/run.log")"; fi
  done
  if ! "$tmp/cpp/consumer_fl" >"$tmp/run.log" 2>&1; then echo "FAIL: consumer_fl:"; cat "$tmp/run.log"; fail=1
  else cat "$tmp/run.log"; fi
  # Component torch: a LibTorch consumer where it was built; elsewhere requiring it is an error.
  mkdir -p "$tmp/torch"
  cp "$src/tests/install/consumer_torch.cpp" "$tmp/torch/"
  printf 'cmake_minimum_required(VERSION 3.16)\nproject(t CXX)\nset(CMAKE_CXX_STANDARD 17)\nfind_package(zen CONFIG REQUIRED COMPONENTS torch)\nadd_executable(consumer_torch consumer_torch.cpp)\ntarget_link_libraries(consumer_torch PRIVATE zen::torch)\n' \
    >"$tmp/torch/CMakeLists.txt"
  if [ "$torch" = ON ]; then
    if cmake -S "$tmp/torch" -B "$tmp/torch/b" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/torch.log" 2>&1 &&
       cmake --build "$tmp/torch/b" >>"$tmp/torch.log" 2>&1 && "$tmp/torch/b/consumer_torch" >"$tmp/run.log" 2>&1; then
      cat "$tmp/run.log"
    else
      echo "FAIL: the LibTorch consumer:"; cat "$tmp/torch.log" "$tmp/run.log" 2>/dev/null; fail=1
    fi
  elif cmake -S "$tmp/torch" -B "$tmp/torch/b" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/torch.log" 2>&1; then
    echo "FAIL: find_package(zen COMPONENTS torch) succeeded on a build without it"; fail=1
  fi
else
  echo "FAIL: the CMake consumer does not build against the installed zen:"; cat "$tmp/cpp.log"; fail=1
fi

# 2. C consumer with a plain compiler line from pkg-config.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs zen) || { echo "FAIL: pkg-config does not know zen"; exit 1; }
echo "pkg-config --cflags --libs zen: $flags"
if cc -std=c11 -Wall -Wextra -Werror -pedantic "$src/tests/install/consumer_c.c" -o "$tmp/consumer_c" $flags -Wl,-rpath,"$prefix/lib" \
     >"$tmp/c.log" 2>&1; then
  if ! "$mpiexec" -n 2 "$tmp/consumer_c" >"$tmp/run.log" 2>&1; then echo "FAIL: consumer_c under mpirun -n 2:"; cat "$tmp/run.log"; fail=1
  else echo "consumer_c: $(grep consumer_c "$tmp/run.log")"; fi
else
  echo "FAIL: the C consumer does not compile from pkg-config's flags:"; cat "$tmp/c.log"; fail=1
fi

# 3. The version of the CMake package is the library's.
grep -q "PACKAGE_VERSION \"$(sed -n 's/#define ZEN_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/zen/version.h")\"" \
  "$prefix/lib/cmake/zen/zenConfigVersion.cmake" || { echo "FAIL: package version != zen/version.h"; fail=1; }
# 4. The Python package (python/zen): installed where the install said, finding the installed libzen.
if [ -n "$py" ]; then
  site=$(sed -n 's/.*zen: Python package installed to \(.*\)\/zen (import zen.*/\1/p' "$tmp/install.log")
  if [ -z "$site" ] || [ ! -f "$site/zen/__init__.py" ]; then
    echo "FAIL: the install did not print where the Python package went:"; cat "$tmp/install.log"; fail=1
  elif grep -rqE "$src|$build" "$site/zen"; then
    echo "FAIL: the installed Python package refers to the source or build tree"; fail=1
  else
    check='import sys, numpy as np, zen
c = zen.Communicator.loopback(1)[0]
i, v = zen.SparseAllreduce(c, 10, 1, "f32", "balanced").sparse(np.array([3, 3], np.int32), np.ones(2, np.float32))
assert list(i) == [3] and list(v) == [2.0], (i, v)
assert zen.__version__ == sys.argv[1], (zen.__version__, sys.argv[1])
print("import zen", zen.__version__, "from", zen.__file__, "with", zen.library_path)'
    ver=$(sed -n 's/#define ZEN_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/zen/version.h")
    if (cd "$tmp" && env -u ZEN_LIBRARY PYTHONPATH="$site" "$py" -c "$check" "$ver") >"$tmp/py.log" 2>&1 &&
       grep -q "with $prefix/lib/libzen.so" "$tmp/py.log"; then
      cat "$tmp/py.log"
    else
      echo "FAIL: import zen from $site:"; cat "$tmp/py.log"; fail=1
    fi
    # pip, offline, into a venv that sees Debian's numpy (a copy of the sources: pip builds in the tree).
    mkdir -p "$tmp/pipsrc" && cp -r "$src/python" "$src/CMakeLists.txt" "$tmp/pipsrc/"
    if "$py" -m venv --system-site-packages "$tmp/venv" >"$tmp/pip.log" 2>&1 &&
       "$tmp/venv/bin/python" -m pip install --no-index "$tmp/pipsrc/python" >>"$tmp/pip.log" 2>&1 &&
       (cd "$tmp" && ZEN_LIBRARY="$prefix/lib/libzen.so" "$tmp/venv/bin/python" -c "$check
import importlib.metadata as m; assert m.version(\"zen\") == zen.__version__; assert \"$tmp/venv\" in zen.__file__" "$ver") \
         >>"$tmp/pip.log" 2>&1; then
      echo "pip install ./python (offline, venv): $(tail -n 1 "$tmp/pip.log")"
    else
      echo "FAIL: pip install ./python:"; cat "$tmp/pip.log"; fail=1
    fi
  fi
fi
[ $fail = 0 ] && echo "install_test: pass"
exit $fail
