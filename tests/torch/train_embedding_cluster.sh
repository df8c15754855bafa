#!/usr/bin/env bash
# examples/train_embedding across hosts: 2 network-namespace hosts (scripts/cluster.sh, 1 Gbit/s, one
# rank each, their own addresses 10.235.0.1-2), every synchronization including Gloo must train to the
# same parameters (--check). Gloo must bind to the host's own address (the one its peer reaches), not
# 127.0.0.1. Its own namespaces (prefix zeng, 10.235.0.0/24), apart from the other cluster tests.
# Exit 77 (ctest: skipped) where network namespaces cannot be created.
#   train_embedding_cluster.sh REPO TRAIN_EMBEDDING VARIANTS
set -uo pipefail
repo=$1 bin=$2 variants=$3
export ZEN_CLUSTER_PREFIX=zeng ZEN_CLUSTER_SUBNET=10.235.0 ZEN_CLUSTER_STATE=/run/zen-cluster-gloo
source "$repo/tests/cluster/cluster_lib.sh"
cluster_check_or_skip
log=$(mktemp)
trap 'cl down >/dev/null 2>&1; rm -f "$log"' EXIT
cl up 2 --rate 1gbit >/dev/null || exit 1
cl run -- "$bin" --corpus "$repo/tests/data/corpus-tiny.txt" --steps 6 --warmup 2 --batch 64 --dim 16 --interval 3 \
  --sync "$variants" --check >"$log" 2>&1
rc=$?
cat "$log"
fail=0
[ $rc = 0 ] || { echo "FAIL: train_embedding exited $rc"; fail=1; }
grep -q "^check: all variants agree" "$log" || { echo "FAIL: the variants do not agree"; fail=1; }
if [[ $variants == *gloo* ]]; then
  grep -q "^# gloo: rank 0 binds to 10\.235\.0\.1$" "$log" || { echo "FAIL: Gloo did not bind to the host's address"; fail=1; }
fi
[ $fail = 0 ] && echo "train_embedding_cluster: pass"
exit $fail
