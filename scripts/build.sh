#!/usr/bin/env bash
# Configures (once) and builds H2 in ./build with warnings as errors, the way CI builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

# The CUDA toolkit's standard location, so the CUDA plugin builds where nvcc is not on PATH.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=$PATH:/usr/local/cuda/bin
fi

build_dir=${H2_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  meson setup "$build_dir" --werror
fi
meson compile -C "$build_dir"
