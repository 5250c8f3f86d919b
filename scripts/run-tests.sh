#!/usr/bin/env bash
# The README's second command (and CI's): installs the dependencies, builds H2 with warnings as
# errors, and runs every test of the quick suite. Benchmarks are the separate `slow` suite.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/build.sh
meson test -C "${H2_BUILD_DIR:-build}" --suite quick --print-errorlogs
