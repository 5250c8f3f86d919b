#!/usr/bin/env bash
# Installs everything H2 needs to build, run and test on Debian 12.
# Idempotent, non-interactive, needs root (or sudo). Used by both README quick-start commands and by CI.
set -euo pipefail

packages=(
  # build
  meson ninja-build pkg-config g++ git clang-format
  # libraries the code uses
  libboost-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfabric-dev libfabric-bin libibverbs-dev librdmacm-dev libpmix-dev
  libssl-dev libxxhash-dev
  # peers for side-by-side benchmarks
  openmpi-bin libopenmpi-dev libgloo-dev
  # `ip netns`: the tests' and benchmarks' test hosts in network namespaces
  iproute2
)
# LibTorch (and PyTorch for DiTorch's Python package) pull in a large set of recommended packages we
# do not need.
no_recommends=(libtorch-dev python3-torch)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

need=($(missing "${packages[@]}"))
need_nr=($(missing "${no_recommends[@]}"))
if [ ${#need[@]} -eq 0 ] && [ ${#need_nr[@]} -eq 0 ]; then
  echo "install-deps: all dependencies are already installed"
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
echo "install-deps: installing ${need[*]} ${need_nr[*]}"
as_root apt-get update -q
if [ ${#need[@]} -gt 0 ]; then
  as_root apt-get install -y -q "${need[@]}"
fi
if [ ${#need_nr[@]} -gt 0 ]; then
  as_root apt-get install -y -q --no-install-recommends "${need_nr[@]}"
fi
echo "install-deps: done"
