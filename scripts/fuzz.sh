#!/usr/bin/env bash
# Coverage-guided fuzzing of what H2 reads from outside (libFuzzer, with AddressSanitizer and
# UndefinedBehaviorSanitizer): the cluster, model and plan parsers, the checkpoint manifest and layer
# files, and the rendezvous store's wire protocol.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Installs clang if missing, builds the targets in ./build-fuzz (clang, -Dfuzz=true), seeds each
# corpus (the examples' descriptions, a plan h2 makes, hand-made checkpoint files and store frames)
# and runs every target (or the TARGETs named: description_cluster, description_model,
# description_plan, checkpoint_manifest, checkpoint_layer, store_protocol) for SECONDS (default 60)
# each. Corpora grow in build-fuzz/corpus/TARGET; what a target finds (crash-*, leak-*, timeout-*)
# lands in build-fuzz/findings/TARGET: turn each into a regression test. Prints each target's runs,
# executions per second and coverage; exits 1 when any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}
bash scripts/install-deps.sh
# libFuzzer and the sanitizer runtimes come with clang (Debian: libclang-rt-14-dev).
if ! command -v clang++ >/dev/null || ! dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok"; then
  as_root apt-get install -y --no-install-recommends clang libclang-rt-14-dev
fi

build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcuda=disabled -Dtorch_oracle=disabled -Dbenchmarks=disabled -Dtests=false
fi
ninja -C "$build"

# ---- Seeds ----
corpus=$build/corpus
mkdir -p "$corpus"/{description_cluster,description_model,description_plan,checkpoint_manifest,checkpoint_layer,store_protocol}
cp examples/clusters/*.json "$corpus/description_cluster/"
cp examples/models/*.json "$corpus/description_model/"
export H2_PLUGIN_PATH=$PWD/$build/plugins/cpu-reference
ASAN_OPTIONS=detect_leaks=0 "$build/tools/h2" plan --cluster examples/clusters/local.json \
  --model examples/models/gpt-tiny.json -o "$corpus/description_plan/local-gpt-tiny.json" >/dev/null
ASAN_OPTIONS=detect_leaks=0 "$build/tools/h2" plan --cluster examples/clusters/h2-1024.json \
  --model examples/models/dense-13b.json -o "$corpus/description_plan/h2-1024-13b.json" >/dev/null
python3 scripts/fuzz_seeds.py "$corpus"

# ---- Runs ----
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(description_cluster description_model description_plan checkpoint_manifest
  checkpoint_layer store_protocol)
found=0
summary=()
for target in "${targets[@]}"; do
  program=$(find "$build" -name "fuzz_$target" -type f -perm -u+x | head -1)
  [ -n "$program" ] || { echo "fuzz.sh: no target '$target' in $build" >&2; exit 2; }
  mkdir -p "$build/findings/$target"
  echo "== $target: $seconds s"
  log=$build/findings/$target.log
  # -timeout: one input over 10 s is a hang; -rss_limit_mb: a bounded parser stays far below.
  set +e
  "$program" "$corpus/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$build/findings/$target/" -print_final_stats=1 >"$log" 2>&1
  code=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  coverage=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  artifacts=$(find "$build/findings/$target" -type f | wc -l)
  summary+=("$(printf '%-22s %12s %10s %8s %9s' "$target" "$runs" "$speed" "$coverage" "$artifacts")")
  if [ "$code" -ne 0 ] || [ "$artifacts" -ne 0 ]; then
    found=1
    echo "fuzz.sh: $target found something (exit $code); see $log and $build/findings/$target/" >&2
    grep -E "ERROR|SUMMARY|==[0-9]+==" "$log" | head -20 >&2 || true
  fi
done
# What a checkpoint target that crashed left (those of live fuzzers stay).
for dir in /dev/shm/h2-fuzz-checkpoint-*; do
  [ -e "$dir" ] && ! kill -0 "${dir##*-}" 2>/dev/null && rm -rf "$dir"
done
echo
printf '%-22s %12s %10s %8s %9s\n' TARGET RUNS EXEC/S COVERAGE FINDINGS
printf '%s\n' "${summary[@]}"
exit $found
