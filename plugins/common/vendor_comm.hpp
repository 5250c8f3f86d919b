// What a plugin keeps of one communicator of its vendor's collective library (HCCL, CNCL), beyond the
// library's own handle: its device and place, whether and why it was aborted, and the streams its
// work went to, which an abort fails with its reason. `Stream` is the plugin's stream record, with
// `device`, and `mutex` guarding `sticky` and `sticky_status` (its first asynchronous error).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "collective_checks.hpp"
#include "plugin_error.hpp"
#include "streams_used.hpp"

namespace h2::plugin {

template <typename Stream, typename Handle>
class VendorComm {
 public:
  VendorComm(const char* library, int32_t device, int rank, int size, Handle handle)
      : library_(library), device_(device), rank_(rank), size_(size), handle_(handle) {}

  int32_t device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  Handle& handle() { return handle_; }

  // Throws PluginError(DEVICE_ERROR) naming `call` and the reason once the communicator is aborted.
  void throw_if_aborted(const char* call) {
    if (aborted_) fail(H2_STATUS_DEVICE_ERROR, std::string(call) + ": " + aborted_message());
  }

  // `stream` for a call of this communicator: refused when the communicator is destroyed or aborted or
  // the stream is of another device, else remembered (an abort fails it). Remembered before the
  // abort is checked, so that an abort in between still reaches the stream.
  const std::shared_ptr<Stream>& use(const std::shared_ptr<Stream>& stream, const char* call) {
    if (stream->device != device_)
      fail(H2_STATUS_INVALID_ARGUMENT, "the stream belongs to device " + std::to_string(stream->device) +
                                           ", the communicator to device " + std::to_string(device_));
    if (destroyed_) fail(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": the communicator was destroyed");
    streams_.add(stream);
    throw_if_aborted(call);
    return stream;
  }

  // Says the library's handle is gone (comm_destroy), for calls still holding the record (a group).
  void destroyed() { destroyed_ = true; }

  // Marks the communicator aborted for `reason` (NULL: "aborted") and fails every stream it used
  // with that, unless they failed already. Returns false when it was aborted before.
  bool abort(const char* reason) {
    {
      std::lock_guard lock(mutex_);
      if (reason_.empty()) reason_ = reason != nullptr ? reason : "aborted";
    }
    if (aborted_.exchange(true)) return false;
    const std::string message = aborted_message();
    streams_.for_each([&](Stream& stream) {
      std::lock_guard lock(stream.mutex);
      if (stream.sticky_status == H2_STATUS_OK) {
        stream.sticky_status = H2_STATUS_DEVICE_ERROR;
        stream.sticky = message;
      }
    });
    return true;
  }

 private:
  std::string aborted_message() {
    std::lock_guard lock(mutex_);
    return "the " + std::string(library_) + " communicator was aborted: " + reason_;
  }

  const char* library_;
  int32_t device_;
  int rank_, size_;
  Handle handle_;
  std::atomic<bool> aborted_ = false;
  std::atomic<bool> destroyed_ = false;
  std::mutex mutex_;  // guards reason_
  std::string reason_;
  StreamsUsed<Stream> streams_;
};

// `data` as a buffer of `count` elements of `dtype` that a vendor library may take: checked to lie
// in one live device allocation (`is_device_memory(ptr, bytes)`), since the library would fault on
// anything else. Empty buffers pass as they are.
template <typename IsDeviceMemory>
void* library_buffer(const void* data, uint64_t count, uint32_t dtype, const char* role,
                     const IsDeviceMemory& is_device_memory) {
  const uint64_t bytes = count * collective_element_size(dtype);
  if (bytes == 0) return const_cast<void*>(data);
  require(data, role);
  if (!is_device_memory(data, bytes))
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + " is not inside one live device allocation of this plugin (" +
                                         std::to_string(bytes) + " bytes)");
  return const_cast<void*>(data);
}

}  // namespace h2::plugin
