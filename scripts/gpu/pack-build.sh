#!/usr/bin/env bash
# Run here (Debian 12, CUDA toolkit installed): builds H2 with the CUDA plugin in ./build-gpu and
# packs what a GPU machine needs to run its checks into .gpu-build/ (ignored by git): the build
# tree's programs and libraries (their RUNPATHs are relative, so the layout is kept) and, in
# .gpu-build/libs, every shared library they load that a GPU machine may lack (libfabric, rdma-core,
# PMIx, xxhash, OpenSSL…). glibc, the C++ runtime and the NVIDIA libraries are left out: the GPU
# machine's own are newer or must match its driver. Pass `.gpu-build` in the device tool's `carry`;
# scripts/gpu/run-gpu-checks.sh uses it instead of building there, which saves the device minutes a
# build would take (the device machine has no package registry to install the build's dependencies).
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=$PATH:/usr/local/cuda/bin; fi

# Benchmarks on (allocator_bench needs Google Benchmark), but only the targets below are built.
[ -f build-gpu/build.ninja ] || meson setup build-gpu --werror -Dcuda=enabled -Dtorch_oracle=disabled -Dbenchmarks=auto
meson configure build-gpu -Dbenchmarks=auto
# What the checks run, not the whole test tree: on two cores that saves most of the build's time.
ninja -C build-gpu tools/h2 plugins/cpu-reference/libh2-plugin-cpu-reference.so plugins/cuda/libh2-plugin-cuda.so \
  bench/cuda_kernels bench/allocator_bench tools/tests/tools_test_h2_devices core/tests/core_test_memory_export

pack=.gpu-build
rm -rf "$pack"
mkdir -p "$pack/libs"
# Programs, libraries and plugins, without object files and Meson's private state.
(cd build-gpu && find . -path '*.p' -prune -o -path './meson-*' -prune -o -type f \
  \( -perm -u+x -o -name '*.so*' \) -print -o -type l -name '*.so*' -print) | while read -r f; do
  mkdir -p "$pack/build-gpu/$(dirname "$f")"
  cp -a "build-gpu/$f" "$pack/build-gpu/$f"
done
# Without debug information (the device tool carries 64 MiB at most; a debug h2 alone is 87 MB).
find "$pack/build-gpu" -type f \( -perm -u+x -o -name '*.so*' \) -exec strip --strip-debug {} + 2>/dev/null || true

# The libraries they load, from this machine, except those the GPU machine brings itself.
leave_out='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcublas|libcudart|libnvidia)'
find "$pack/build-gpu" -type f \( -perm -u+x -o -name '*.so*' \) -exec ldd {} + 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u | while read -r name path; do
  [[ $name =~ $leave_out ]] && continue
  [[ $path == */build-gpu/* ]] && continue
  cp -L "$path" "$pack/libs/$name"
done
# libfabric's providers that are loaded as plugins at run time.
for dir in /usr/lib/x86_64-linux-gnu/libfabric; do
  [ -d "$dir" ] && cp -a "$dir" "$pack/libs/libfabric-providers"
done
du -sh "$pack" "$pack/libs"
ls "$pack/libs"
