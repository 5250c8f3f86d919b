#!/usr/bin/env bash
# Run on the GPU machine (the device tool), in the repository root, with .gpu-debs carried:
#   bash scripts/gpu/run-gpu-checks.sh build    configure with -Dcuda=enabled, build, run the quick tests
#   bash scripts/gpu/run-gpu-checks.sh conform  h2 conform --plugin cuda [--full]  (CONFORM_FULL=1 for --full)
#   bash scripts/gpu/run-gpu-checks.sh bench    gemm vs cuBLAS, attention vs PyTorch SDPA, ratios
#   bash scripts/gpu/run-gpu-checks.sh train    issue 8: a pipeline over the cuda and cpu-reference plugins
#                                               trains gpt-tiny as one device does (scripts/gpu/pipeline_check.py)
# Each stage writes its logs and reports under $OUT (or ./gpu-out). Stages reuse ./build-gpu, which
# the device machine keeps between calls while it stays warm.
set -euo pipefail
cd "$(dirname "$0")/../.."
stage=${1:?usage: run-gpu-checks.sh build|conform|bench|train}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"

# The build's Debian headers and libraries, unpacked outside / (never over the machine's own).
deb_root=/tmp/h2-debs
if [ ! -d "$deb_root/usr" ]; then
  ls .gpu-debs/*.deb >/dev/null 2>&1 || { echo "run-gpu-checks: no .gpu-debs/*.deb (run scripts/gpu/fetch-debs.sh here and carry .gpu-debs)" >&2; exit 2; }
  for f in .gpu-debs/*.deb; do dpkg -x "$f" "$deb_root"; done
fi
multiarch=$deb_root/usr/lib/x86_64-linux-gnu
export CPATH=$deb_root/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$multiarch${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_PATH=$multiarch/pkgconfig:$deb_root/usr/share/pkgconfig
export CMAKE_PREFIX_PATH=$deb_root/usr
export BOOST_ROOT=$deb_root/usr
export PATH=/usr/local/cuda/bin:$PATH
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"

case $stage in
  build)
    [ -f build-gpu/build.ninja ] || meson setup build-gpu --werror -Dcuda=enabled -Dtorch_oracle=disabled \
      -Dbenchmarks=disabled 2>&1 | tee "$out/setup.log"
    ninja -C build-gpu 2>&1 | tail -20 | tee "$out/build.log"
    meson test -C build-gpu --suite quick --print-errorlogs 2>&1 | tail -40 | tee "$out/tests.log"
    build-gpu/tools/h2 devices --plugin build-gpu/plugins/cuda/libh2-plugin-cuda.so | tee "$out/devices.txt"
    ;;
  conform)
    full=()
    [ "${CONFORM_FULL:-0}" = 1 ] && full=(--full)
    H2_PLUGIN_PATH=build-gpu/plugins/cpu-reference:build-gpu/plugins/cuda \
      build-gpu/tools/h2 conform --plugin cuda "${full[@]}" --report-dir "$out/conform" 2>&1 | tee "$out/conform.log"
    ;;
  bench)
    H2_PLUGIN_PATH=build-gpu/plugins/cuda build-gpu/bench/cuda_kernels --json "$out/cuda_kernels.json" |
      tee "$out/cuda_kernels.txt"
    python3 bench/cuda/sdpa_peer.py "$out/cuda_kernels.json" "$out/sdpa_peer.json"
    python3 bench/cuda/compare.py "$out/cuda_kernels.json" "$out/sdpa_peer.json" "$out/ratios.json" |
      tee "$out/ratios.txt"
    ;;
  train)
    # The runs' files stay on the machine ($OUT takes few files, 2 folders deep); the table and its
    # JSON come back.
    H2_PLUGIN_PATH=build-gpu/plugins/cpu-reference:build-gpu/plugins/cuda \
      python3 scripts/gpu/pipeline_check.py --h2 build-gpu/tools/h2 --model examples/models/gpt-tiny.json \
      --out /tmp/h2-pipeline-check --timeout 180 2>&1 | tee "$out/pipeline.log"
    cp /tmp/h2-pipeline-check/pipeline_check.json "$out/"
    ;;
  *) echo "run-gpu-checks: unknown stage '$stage' (build, conform, bench or train)" >&2; exit 2 ;;
esac
