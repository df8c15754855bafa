#!/usr/bin/env bash
# Cut the tiny Fashion-MNIST sample used by the fl unit tests (tests/data/fmnist-tiny) from the
# Debian dataset-fashion-mnist files: the first N_TRAIN training and N_TEST test images with their
# labels, as valid gzip-compressed IDX files (header count rewritten, big-endian).
#
# usage: scripts/make_fmnist_tiny.sh [SRC_DIR] [OUT_DIR] [N_TRAIN] [N_TEST]
set -eu  # no pipefail: head closes the gunzip pipes early on purpose (SIGPIPE)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${1:-/usr/share/datasets/fashion-mnist}"
out="${2:-$root/tests/data/fmnist-tiny}"
n_train="${3:-200}"
n_test="${4:-100}"
mkdir -p "$out"

be32() {  # big-endian uint32 as raw bytes
  printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))"
  printf "\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"
}

cut_split() {  # split count
  local split=$1 n=$2
  local img="$src/$split-images-idx3-ubyte.gz" lab="$src/$split-labels-idx1-ubyte.gz"
  [[ -r $img && -r $lab ]] || { echo "missing $img or $lab (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
  local magic; magic=$(gzip -dc "$img" | head -c 4 | od -An -tx1 | tr -d ' \n')
  [[ $magic == 00000803 ]] || { echo "$img: magic 0x$magic, expected 0x00000803" >&2; exit 1; }
  magic=$(gzip -dc "$lab" | head -c 4 | od -An -tx1 | tr -d ' \n')
  [[ $magic == 00000801 ]] || { echo "$lab: magic 0x$magic, expected 0x00000801" >&2; exit 1; }
  { be32 $((0x803)); be32 "$n"; be32 28; be32 28
    gzip -dc "$img" | tail -c +17 | head -c $((n * 784))
  } | gzip -9n > "$out/$split-images-idx3-ubyte.gz"
  { be32 $((0x801)); be32 "$n"
    gzip -dc "$lab" | tail -c +9 | head -c "$n"
  } | gzip -9n > "$out/$split-labels-idx1-ubyte.gz"
  local got; got=$(gzip -dc "$out/$split-images-idx3-ubyte.gz" | wc -c)
  [[ $got -eq $((16 + n * 784)) ]] || { echo "$split images: $got bytes, expected $((16 + n * 784))" >&2; exit 1; }
  got=$(gzip -dc "$out/$split-labels-idx1-ubyte.gz" | wc -c)
  [[ $got -eq $((8 + n)) ]] || { echo "$split labels: $got bytes, expected $((8 + n))" >&2; exit 1; }
}

cut_split train "$n_train"
cut_split t10k "$n_test"
ls -l "$out"
