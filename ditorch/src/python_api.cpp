// The C functions the Python package (python/h2torch) calls through ctypes, so that it needs no
// compiled extension of its own: each returns 0 (or a pointer) on success and -1 (or null) on error,
// with the error's text in h2torch_last_error(). Strings returned stay valid until the calling
// thread's next call into this file.
#include <nlohmann/json.hpp>

#include <exception>
#include <string>

#include "h2torch/h2torch.hpp"

namespace {

thread_local std::string last_error;
thread_local std::string last_text;

template <typename F>
int guarded(F&& f) {
  try {
    f();
    return 0;
  } catch (const std::exception& e) {
    last_error = e.what();
    return -1;
  }
}

const char* text(int status) {
  return status == 0 ? last_text.c_str() : nullptr;
}

}  // namespace

extern "C" {

const char* h2torch_last_error() {
  return last_error.c_str();
}

int h2torch_device_count(int* count) {
  return guarded([&] { *count = h2torch::device_count(); });
}

int h2torch_synchronize() {
  return guarded([] { h2torch::synchronize(); });
}

// "cpu-reference:0": the H2 device behind LibTorch's index.
const char* h2torch_device_label(int index) {
  return text(guarded([&] { last_text = h2torch::device(index).label(); }));
}

const char* h2torch_memory_stats_json(int index) {
  return text(guarded([&] {
    const h2::MemoryStats s = h2torch::memory_stats(index);
    last_text = nlohmann::json{{"caching", s.caching},
                               {"allocated_bytes", s.allocated_bytes},
                               {"requested_bytes", s.requested_bytes},
                               {"reserved_bytes", s.reserved_bytes},
                               {"peak_allocated_bytes", s.peak_allocated_bytes},
                               {"peak_reserved_bytes", s.peak_reserved_bytes},
                               {"allocations", s.allocations},
                               {"cache_hits", s.cache_hits},
                               {"plugin_allocations", s.plugin_allocations},
                               {"plugin_frees", s.plugin_frees},
                               {"cache_flushes", s.cache_flushes}}
                    .dump();
  }));
}

const char* h2torch_fallback_counts_json() {
  return text(guarded([] { last_text = nlohmann::json(h2torch::fallback_counts()).dump(); }));
}

}  // extern "C"
