#!/usr/bin/env bash
# Every public C++ header compiles on its own with -std=c++17 -Wall -Wextra -Werror -pedantic, and
# zen.h compiles as C11 with the same flags (third-party headers are -isystem, as a consumer has them).
#   header_check.sh CXX CC SOURCE_DIR BUILD_DIR [extra -isystem/-D flags...]
set -uo pipefail
cxx=$1 cc=$2 src=$3 build=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0
for h in $(cd "$src/include" && find zen -name '*.hpp' | LC_ALL=C sort); do
  # zen/torch.hpp needs LibTorch's headers: checked when the build found LibTorch (ZEN_HC_TORCH=1).
  [ "$h" = zen/torch.hpp ] && [ "${ZEN_HC_TORCH:-0}" != 1 ] && continue
  printf '#include "%s"\n' "$h" >"$tmp/h.cpp"
  if ! "$cxx" -std=c++17 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$src/include" -I"$build/include" "$@" \
       "$tmp/h.cpp" 2>"$tmp/err"; then
    echo "FAIL: $h"; head -n 5 "$tmp/err"; fail=1
  fi
  n=$((n + 1))
done
printf '#include "zen/zen.h"\nint main(void) { int a = 0, b = 0; zenGetVersion(&a, &b); return a + b; }\n' >"$tmp/c.c"
"$cc" -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$src/include" -I"$build/include" "$tmp/c.c" ||
  { echo "FAIL: zen.h as C11"; fail=1; }
[ $fail = 0 ] && echo "header_check: $n C++ headers and zen.h (C11) compile alone with -Wall -Wextra -Werror -pedantic"
exit $fail
