# Shared by the tests on a namespace cluster (sourced after `repo` and the ZEN_CLUSTER_* variables
# are set): `cl ARGS...` runs scripts/cluster.sh; `cluster_check_or_skip` ends the test with exit 77
# (ctest: skipped) where network namespaces cannot be created, and with 1 on any other failure of
# `cluster.sh check` (its message printed).
cl() { bash "$repo/scripts/cluster.sh" "$@"; }
cluster_check_or_skip() {
  local err rc
  err=$(mktemp)
  cl check >/dev/null 2>"$err" || {
    rc=$?
    cat "$err"
    rm -f "$err"
    [ $rc = 77 ] && echo "SKIP: no network namespaces here" && exit 77
    exit 1
  }
  rm -f "$err"
}
