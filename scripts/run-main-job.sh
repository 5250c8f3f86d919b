#!/usr/bin/env bash
# The README's first command: installs the dependencies, builds H2, and runs the main job on the
# embedded default, a local cluster of three cpu-reference devices with different memory capacities.
# Set H2_CPU_REFERENCE_DEVICES / H2_CPU_REFERENCE_MEMORY yourself to describe another one.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/build.sh

export H2_CPU_REFERENCE_MEMORY=${H2_CPU_REFERENCE_MEMORY:-4GiB,2GiB,1GiB}
exec meson devenv -C "${H2_BUILD_DIR:-build}" h2 devices "$@"
