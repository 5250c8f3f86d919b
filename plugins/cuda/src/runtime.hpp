// The state of an initialized CUDA plugin: per device a memory pool, per stream its CUDA stream, a
// cuBLAS handle and a device-side error record for errors that depend on data (an index out of
// range), and the registries that turn a stale handle into an error instead of a crash.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"
#include "handle_registry.hpp"

namespace h2::cuda {

// Written by kernels that meet an invalid index; read back when the stream is synchronised.
struct DeviceError {
  int code;  // 0: none; else an H2_Op
  int dim;
  long long value;
  long long limit;
};

struct Stream {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  void* blas_workspace = nullptr;
  DeviceError* error = nullptr;  // device memory
  std::mutex mutex;              // cuBLAS handles are not safe to share between threads

  // The first asynchronous failure of the stream's work: a kernel's data check (an index out of
  // range), or a collective library's communicator aborted under work issued here. Any thread may
  // set it (comm_abort runs on any); later ones are dropped.
  void set_sticky(const std::string& why) {
    std::lock_guard lock(sticky_mutex);
    if (sticky_error.empty()) sticky_error = why;
  }
  std::string sticky() const {
    std::lock_guard lock(sticky_mutex);
    return sticky_error;
  }

 private:
  mutable std::mutex sticky_mutex;
  std::string sticky_error;
};

struct Event {
  int device = 0;
  cudaEvent_t event = nullptr;
  bool timing = true;
  std::atomic<bool> recorded = false;  // event_record and waits may race from several threads
};

class Runtime {
 public:
  explicit Runtime(const H2_InitArgs& args);  // throws PluginError with RUNTIME_MISSING / NO_DEVICE
  ~Runtime();

  int device_count() const { return device_count_; }
  void check_device(int device) const;
  // Checks `device` and that `ptr` is its device memory (INVALID_ARGUMENT otherwise); makes it current.
  void check_memory_of(int device, const void* ptr) const;
  void properties(int device, H2_DeviceProperties& props) const;
  void memory_info(int device, uint64_t& free_bytes, uint64_t& total_bytes) const;

  void* allocate(int device, size_t bytes);
  void release(int device, void* ptr);
  // mem_alloc_async and mem_free_async: cudaMallocFromPoolAsync and cudaFreeAsync on `stream`.
  void* allocate_async(int device, size_t bytes, Stream& stream);
  void release_async(int device, void* ptr, Stream& stream);

  H2_Stream* create_stream(int device);
  void destroy_stream(H2_Stream* handle);
  std::shared_ptr<Stream> stream(H2_Stream* handle) const;
  // Waits for the stream and reports asynchronous errors (CUDA's or a kernel's data check).
  void synchronize(Stream& stream);
  H2_Status query(Stream& stream);

  H2_Event* create_event(int device, uint32_t flags);
  void destroy_event(H2_Event* handle);
  std::shared_ptr<Event> event(H2_Event* handle) const;

  void log(H2_LogLevel level, const std::string& message) const;

 private:
  void read_device_error(Stream& stream);
  [[noreturn]] void out_of_memory(int device, size_t bytes);

  H2_LogFn log_fn_;
  void* log_user_data_;
  uint32_t log_level_;
  int device_count_ = 0;
  std::vector<cudaMemPool_t> pools_;
  std::vector<cudaStream_t> allocation_streams_;  // one per device, for pool allocations

  h2::plugin::HandleRegistry<H2_Stream, Stream> streams_{"stream"};
  h2::plugin::HandleRegistry<H2_Event, Event> events_{"event"};
};

// The runtime between initialize and shutdown; throws when the plugin is not initialized.
Runtime& runtime();
std::unique_ptr<Runtime>& runtime_slot();

// Makes `device` current on the calling thread (CUDA's current device is per thread).
void use_device(int device);

}  // namespace h2::cuda
