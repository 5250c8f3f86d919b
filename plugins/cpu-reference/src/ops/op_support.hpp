// What every operator slot of the reference does around its kernel: find the stream, resolve the
// argument tensors (checking them against the device's allocations) while the caller waits, and
// enqueue the kernel on the stream's worker, where any failure becomes the stream's sticky error.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "../plugin_state.hpp"
#include "common.hpp"
#include "tensor_ref.hpp"

namespace h2::cpu_reference {

class OpCall {
 public:
  OpCall(const char* op, H2_Stream* stream)
      : op_(op), runtime_(runtime()), stream_(runtime_.stream(stream)), device_(stream_->device()) {}

  // The tensor resolved for the kernel; an absent optional tensor gives present == false.
  TensorRef tensor(const H2_Tensor& t, const char* role) const {
    try {
      return resolve_tensor(runtime_, device_, t, role);
    } catch (const PluginError& e) {
      throw PluginError(e.status(), std::string(op_) + ": " + e.what());
    }
  }

  ThreadPool& pool() const { return runtime_.pool(); }
  const char* op() const { return op_; }

  // Enqueues the kernel; it runs on the stream's worker after earlier work on the stream.
  template <typename Kernel>
  void enqueue(Kernel&& kernel) {
    stream_->enqueue([op = op_, kernel = std::forward<Kernel>(kernel)]() mutable {
      try {
        kernel();
      } catch (const PluginError& e) {
        throw PluginError(e.status(), std::string(op) + ": " + e.what());
      }
    });
  }

 private:
  const char* op_;  // a string literal: lives for the whole program
  Runtime& runtime_;
  std::shared_ptr<Stream> stream_;
  int device_;
};

// The body of every operator slot: validates the stream, then lets `setup` resolve tensors and
// enqueue, mapping failures to a status and the thread's last error.
template <typename Setup>
H2_Status run_op(const char* op, H2_Stream* stream, const void* args, Setup&& setup) noexcept {
  return guarded(op, [&] {
    if (args == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, std::string(op) + ": args is NULL");
    OpCall call(op, stream);
    setup(call);
  });
}

// [[noreturn]] helper for data-dependent errors inside kernels.
[[noreturn]] inline void index_error(const std::string& what, int64_t index, int64_t limit) {
  fail(H2_STATUS_INVALID_ARGUMENT,
       what + " " + std::to_string(index) + " is outside [0, " + std::to_string(limit) + ")");
}

}  // namespace h2::cpu_reference
