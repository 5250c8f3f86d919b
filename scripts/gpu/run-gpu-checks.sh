#!/usr/bin/env bash
# Run on a GPU machine, in the repository root, over the build scripts/gpu/pack-build.sh made and
# packed here (.gpu-build: pass it in the device tool's `carry`; nothing is compiled there, and that
# machine has no package registry for the build's dependencies), or over ./build-gpu where H2 was
# built on the GPU machine itself (scripts/gpu/pack-build.sh's first two steps, there):
#   bash scripts/gpu/run-gpu-checks.sh devices  h2 devices, the CUDA plugin's h2_devices test and its dma-buf export
#   bash scripts/gpu/run-gpu-checks.sh conform  h2 conform --plugin cuda [--full]  (CONFORM_FULL=1 for --full,
#                                               CONFORM_OPS=PATTERNS for --ops)
#   bash scripts/gpu/run-gpu-checks.sh bench    gemm vs cuBLAS, attention vs PyTorch SDPA, ratios; the
#                                               caching allocator vs the plugin's, a GPT step with and without
#   bash scripts/gpu/run-gpu-checks.sh comm     a 2-rank allreduce on the GPUs (two ranks on one GPU where
#                                               there is one): DiComm's own, staged, against NCCL through
#                                               the plugin's collective section; ratios
#   bash scripts/gpu/run-gpu-checks.sh train    a pipeline over the cuda and cpu-reference plugins trains
#                                               gpt-tiny as one device does (scripts/gpu/pipeline_check.py)
#   bash scripts/gpu/run-gpu-checks.sh all      devices, bench, comm, then conform and train side by side, each
#                                               under its own time limit (one device call for everything)
# Each stage writes its logs and reports under $H2_GPU_OUT (default ./gpu-out); `all` also packs them
# into $OUT/gpu-out.tar.gz after every stage, so what finished comes back even if the call runs out of
# time (the device tool returns at most 8 files from $OUT). Stage limits: DEVICES_TIMEOUT,
# BENCH_TIMEOUT, COMM_TIMEOUT, CONFORM_TIMEOUT, TRAIN_TIMEOUT (seconds), TRAIN_RUN_TIMEOUT per training run.
set -euo pipefail
script=$(realpath "$0")
cd "$(dirname "$0")/../.."
stage=${1:?usage: run-gpu-checks.sh devices|conform|bench|comm|train|all}
out=${H2_GPU_OUT:-$PWD/gpu-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

if [ -d .gpu-build/build-gpu ]; then
  # The build made here: its programs with the libraries the GPU machine lacks.
  build=$PWD/.gpu-build/build-gpu
  export LD_LIBRARY_PATH=$PWD/.gpu-build/libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  [ -d .gpu-build/libs/libfabric-providers ] && export FI_PROVIDER_PATH=$PWD/.gpu-build/libs/libfabric-providers
elif [ -x build-gpu/tools/h2 ]; then
  build=$PWD/build-gpu
else
  echo "run-gpu-checks: neither .gpu-build (scripts/gpu/pack-build.sh, carried) nor a built ./build-gpu is here" >&2
  exit 2
fi
# cuBLAS from the toolkit, else from the CUDA wheels PyTorch brought.
if ! ldconfig -p | grep -q 'libcublas\.so\.13' && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  cublas=$(find /usr /opt -name 'libcublas.so.13*' -print -quit 2>/dev/null || true)
  [ -n "$cublas" ] && export LD_LIBRARY_PATH=$(dirname "$cublas"):$LD_LIBRARY_PATH
else
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH
fi
plugin_path=$build/plugins/cpu-reference:$build/plugins/cuda
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "nvidia-smi failed"; } | tee "$out/gpu.txt"

case $stage in
  devices)
    "$build/tools/h2" devices --plugin "$build/plugins/cuda/libh2-plugin-cuda.so" 2>&1 | tee "$out/devices.txt"
    H2_PLUGIN_PATH=$plugin_path "$build/tools/h2" devices --json >"$out/devices.json" 2>&1 || true
    H2_TOOL=$build/tools/h2 H2_PLUGIN_PATH=$plugin_path H2_TEST_FAKE_PLUGIN_DIR=$build/core/tests/plugins \
      H2_SOURCE_ROOT=$PWD H2_TEST_CUDA_PLUGIN=$build/plugins/cuda/libh2-plugin-cuda.so \
      "$build/tools/tests/tools_test_h2_devices" --gtest_filter='*Cuda*' 2>&1 | tail -30 | tee "$out/h2_devices_test.log"
    # mem_export_dmabuf (ABI 1.7): a dma-buf of CUDA memory where the driver claims it, else the reason.
    H2_PLUGIN_PATH=$plugin_path H2_TEST_PLUGIN=cuda "$build/core/tests/core_test_memory_export" \
      --gtest_filter='*DmaBuf*' 2>&1 | tail -20 | tee "$out/dmabuf_test.log"
    ;;
  conform)
    full=()
    [ "${CONFORM_FULL:-0}" = 1 ] && full=(--full)
    [ -n "${CONFORM_OPS:-}" ] && full+=(--ops "$CONFORM_OPS")
    H2_PLUGIN_PATH=$plugin_path "$build/tools/h2" conform --plugin cuda "${full[@]}" --report-dir "$out/conform" 2>&1 | tee "$out/conform.log"
    ;;
  bench)
    H2_PLUGIN_PATH=$build/plugins/cuda "$build/bench/cuda_kernels" --json "$out/cuda_kernels.json" |
      tee "$out/cuda_kernels.txt"
    # PyTorch with the machine's own libraries, not the ones carried for H2.
    env -u LD_LIBRARY_PATH python3 bench/cuda/sdpa_peer.py "$out/cuda_kernels.json" "$out/sdpa_peer.json"
    python3 bench/cuda/compare.py "$out/cuda_kernels.json" "$out/sdpa_peer.json" "$out/ratios.json" |
      tee "$out/ratios.txt"
    # The caching allocator against cudaMallocFromPoolAsync/cudaFree through the plugin, and a GPT
    # stage's forward + backward with and without caching (issue 28).
    H2_PLUGIN_PATH=$build/plugins/cuda "$build/bench/allocator_bench" --plugin cuda --model examples/models/gpt-tiny.json \
      --json "$out/allocator.json" --benchmark_min_time=0.1 | tee "$out/allocator.txt"
    ;;
  comm)
    # NCCL for the plugin's collective section: the toolkit's (the plugin's default place), else the
    # one PyTorch's wheels brought.
    if [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ] && [ -z "${NCCL_HOME:-}" ]; then
      nccl=$(find /usr /opt -name 'libnccl.so.2' -print -quit 2>/dev/null || true)
      [ -n "$nccl" ] && export NCCL_HOME=$(dirname "$(dirname "$nccl")")
    fi
    gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
    devices=cuda:0,cuda:0
    [ "$gpus" -ge 2 ] && devices=cuda:0,cuda:1
    H2_PLUGIN_PATH=$plugin_path "$build/tools/h2" devices 2>&1 | grep -E "PLUGIN|cuda" | tee "$out/comm.txt"
    for library in off auto; do
      echo "== H2_DICOMM_VENDOR_COLLECTIVES=$library, ranks on $devices" | tee -a "$out/comm.txt"
      H2_PLUGIN_PATH=$plugin_path H2_DICOMM_VENDOR_COLLECTIVES=$library H2_DICOMM_TIMEOUT=60 \
        "$build/tools/h2" launch -n 2 --devices "$devices" -- "$build/tools/h2" bench comm --op allreduce \
        --min-bytes 1M --max-bytes 256M --factor 4 --iters 20 --warmup 5 --json "$out/comm-$library.json" 2>&1 |
        tee -a "$out/comm.txt" || echo "== exit $? (H2_DICOMM_VENDOR_COLLECTIVES=$library)" | tee -a "$out/comm.txt"
    done
    python3 - "$out/comm-off.json" "$out/comm-auto.json" <<'PY' | tee -a "$out/comm.txt"
import json, os, sys
rows = [{r["bytes"]: r for r in map(json.loads, open(p))} if os.path.exists(p) else {} for p in sys.argv[1:]]
print("allreduce, 2 ranks, f32 sum: busbw GB/s, DiComm (staged) against NCCL (collective section)")
for name, table in zip(("off", "auto"), rows):  # what `h2 bench comm` says ran them
    print(f"  {name}: collectives {next(iter(table.values()), {}).get('collectives', '-')}")
for size in sorted(set(rows[0]) | set(rows[1])):
    own, nccl = rows[0].get(size, {}).get("busbw_gbps"), rows[1].get(size, {}).get("busbw_gbps")
    ratio = f"{nccl / own:.2f}x" if own and nccl else "-"
    print(f"{size:>12} {own if own is not None else '-':>10} {nccl if nccl is not None else '-':>10} {ratio:>8}")
PY
    ;;
  train)
    # The runs' files stay on the machine ($OUT takes few files, 2 folders deep); the table and its
    # JSON come back.
    H2_PLUGIN_PATH=$plugin_path python3 scripts/gpu/pipeline_check.py --h2 "$build/tools/h2" --model examples/models/gpt-tiny.json \
      --out /tmp/h2-pipeline-check --timeout "${TRAIN_RUN_TIMEOUT:-180}" 2>&1 | tee "$out/pipeline.log"
    cp /tmp/h2-pipeline-check/pipeline_check.json "$out/"
    ;;
  all)
    # Devices, then the benchmark alone on the GPU (its timings), then conformance and training side
    # by side (neither is timed). Each stage has its own limit; a failed stage does not stop the rest.
    pack() { [ -n "${OUT:-}" ] && tar -czf "$OUT/gpu-out.tar.gz" -C "$out" . || true; }
    limited() {
      local seconds=$1 rc=0 start=$SECONDS
      shift
      timeout --kill-after=10 "$seconds" bash "$script" "$@" >"$out/$1.log" 2>&1 || rc=$?
      echo "== $1: exit $rc after $((SECONDS - start)) s$([ $rc = 124 ] && echo " (its ${seconds} s limit)")"
    }
    limited "${DEVICES_TIMEOUT:-60}" devices; pack
    limited "${BENCH_TIMEOUT:-150}" bench; pack
    limited "${COMM_TIMEOUT:-120}" comm; pack
    limited "${CONFORM_TIMEOUT:-300}" conform & conform_pid=$!
    limited "${TRAIN_TIMEOUT:-300}" train; pack
    wait "$conform_pid"; pack
    tail -n 40 "$out"/*.log
    ;;
  *) echo "run-gpu-checks: unknown stage '$stage' (devices, conform, bench, comm, train or all)" >&2; exit 2 ;;
esac
