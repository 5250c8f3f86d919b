#!/usr/bin/env bash
# Configures (once) and builds H2 in ./build with warnings as errors, the way CI builds it.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=${H2_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  meson setup "$build_dir" --werror
fi
meson compile -C "$build_dir"
