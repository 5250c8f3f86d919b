// libFuzzer target: any bytes as a checkpoint's manifest (H2_FUZZ_MANIFEST) or as a layer file
// (H2_FUZZ_LAYER), read as `h2 train --resume` reads them. Every input must be read or refused with
// an h2::Error; a crash, a sanitizer report or another exception is a bug. Needs cpu-reference on
// H2_PLUGIN_PATH (the layer target reads into a tensor on it).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "h2/h2.hpp"
#include "h2/heteropp/checkpoint.hpp"

namespace {

namespace fs = std::filesystem;

// A step directory of this process's own in /dev/shm (memory, not disk, for speed), removed when
// the fuzzer exits (libFuzzer ends with exit(), also at the end of -max_total_time).
const fs::path& step_dir() {
  static const fs::path dir = [] {
    const fs::path d = fs::path("/dev/shm") / ("h2-fuzz-checkpoint-" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(step_dir(), ignored);
    });
    return d;
  }();
  return dir;
}

void write(const fs::path& path, const uint8_t* data, size_t size) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#if defined(H2_FUZZ_MANIFEST)
  write(step_dir() / "manifest.json", data, size);
  try {
    h2::heteropp::read_manifest(step_dir().string());
  } catch (const h2::Error&) {
  }
#else
  static std::unique_ptr<h2::Runtime> runtime =
      std::make_unique<h2::Runtime>(h2::RuntimeOptions{.plugins = {"cpu-reference"}});
  static h2::Stream stream = runtime->devices().at(0).create_stream();
  static const h2::Tensor weight = h2::Tensor::empty(runtime->devices().at(0), {4}, h2::DType::f32);
  static const h2::Tensor bias = h2::Tensor::empty(runtime->devices().at(0), {2, 2}, h2::DType::f32);
  write(step_dir() / h2::heteropp::layer_file_name(0, 1), data, size);
  try {
    h2::heteropp::read_layer(stream, step_dir().string(), h2::heteropp::CheckpointState{}, 0, 1,
                             {{"w", weight}, {"b", bias}});
  } catch (const h2::Error&) {
  }
#endif
  return 0;
}
