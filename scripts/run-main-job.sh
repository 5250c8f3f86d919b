#!/usr/bin/env bash
# The README's first command: installs the dependencies, builds H2, and runs the main job on the
# embedded default: `h2 train` of a small GPT (examples/models/gpt-tiny.json) on a local cluster of
# four cpu-reference devices with different memory capacities (examples/clusters/local.json: two
# that hold the model, two that hold it only together, so HeteroAuto puts the small ones in one
# pipeline, after a tensor-parallel stage of the large ones or beside them as replicas of their own),
# profiled on this machine (--profile) and planned by HeteroAuto on the measured costs, so that the
# predicted step time it prints at the end is this machine's. Extra arguments go to `h2 train`
# (e.g. --steps 200, --out DIR, --resume DIR; not --plan, which --profile replaces: for a plan of
# your own, run `h2 train --plan` as the README shows).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
bash scripts/build.sh

exec meson devenv -C "${H2_BUILD_DIR:-build}" --workdir "$PWD" h2 train --cluster "$PWD/examples/clusters/local.json" \
  --model "$PWD/examples/models/gpt-tiny.json" --profile "$@"
