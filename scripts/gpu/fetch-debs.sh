#!/usr/bin/env bash
# Run here (Debian 12): downloads the Debian packages H2's build needs into .gpu-debs/ (ignored by
# git) so that a GPU machine without a package registry can build H2. Pass `.gpu-debs` in the
# device tool's `carry`, then run scripts/gpu/run-gpu-checks.sh there.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.gpu-debs/' .git/info/exclude 2>/dev/null || echo '/.gpu-debs/' >>.git/info/exclude
mkdir -p .gpu-debs
cd .gpu-debs
apt-get download nlohmann-json3-dev libcli11-dev libboost1.74-dev libssl-dev libssl3 libgtest-dev libgmock-dev libxxhash-dev libxxhash0
ls -la
