#!/usr/bin/env bash
# The Brown-corpus embedding traces the shared-memory benchmarks read (8 ranks, B = 256 sentences
# per rank, D = 64, 4 iterations, row-level): data/traces/brown-n8-row and, with --occurrences,
# brown-n8-row-occ. Made once (zen_trace corpus on scripts/fetch_corpus.sh's text); run from the
# repository root after a build.
set -euo pipefail
text=$(bash scripts/fetch_corpus.sh)
for form in row row-occ; do
  dir=data/traces/brown-n8-$form
  if [ ! -s "$dir/trace.json" ]; then
    extra=""
    [ "$form" = row-occ ] && extra="--occurrences"
    build/bin/zen_trace corpus --text "$text" -o "$dir" -n 8 -B 256 -D 64 -T 4 --row-level $extra >/dev/null
  fi
done
