#!/usr/bin/env bash
# Proves the layer check (cmake/ZenLayers.cmake): every real layer's check links, the probe declared
# above the schemes links, and the same probe declared in the core layer fails to link, with an
# undefined reference to the schemes function it calls.
#   layer_check_test.sh CMAKE BUILD_DIR
set -uo pipefail
cmake=$1 build=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
if ! "$cmake" --build "$build" --target zen_layer_checks >"$log" 2>&1; then
  echo "FAIL: the layer checks of the real tree do not link:"; cat "$log"; fail=1
else
  echo "layer checks of the tree: pass ($(ls "$build"/layer_check | wc -l) layers)"
fi
if ! "$cmake" --build "$build" --target zen_layer_probe_ok_layer_check >"$log" 2>&1; then
  echo "FAIL: the probe declared above the schemes does not link:"; cat "$log"; fail=1
else
  echo "probe above the schemes: links"
fi
if "$cmake" --build "$build" --target zen_layer_probe_wrong_layer_check >"$log" 2>&1; then
  echo "FAIL: the probe declared in the core layer linked: its call into the schemes went unnoticed"; fail=1
elif ! grep -q "undefined reference to .zen::scheme_names" "$log"; then
  echo "FAIL: the core-layer probe failed, but not for its reference into the schemes:"; cat "$log"; fail=1
else
  echo "probe in the core layer: refused ($(grep -m1 -o "undefined reference to .zen::scheme_names[^']*'" "$log"))"
fi
[ $fail = 0 ] && echo "layer_check: pass"
exit $fail
