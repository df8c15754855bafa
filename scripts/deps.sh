#!/usr/bin/env bash
# Install the Debian packages zen needs, only those missing. Safe to run repeatedly.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libopenmpi-dev openmpi-bin
      libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
      dataset-fashion-mnist gnuplot-nox npm clang libclang-rt-14-dev valgrind iproute2 doxygen
      libtorch-dev libgloo-dev python3-sgp4 python3-skyfield
      python3-torch python3-mpi4py python3-numpy python3-setuptools python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm may come with a Node.js install outside Debian's packages: then it is not missing.
if command -v npm >/dev/null 2>&1; then
  missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
  echo "zen deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "zen deps: all present"
fi
