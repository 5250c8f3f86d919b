// Devices, as framework code sees them: a plugin's device with its properties, and the factories
// for memory, streams and events on it. A Device is a cheap handle; copies refer to the same device.
// Everything created from a device keeps its plugin loaded, so objects may outlive the Runtime.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "h2/dtype.hpp"
#include "h2/plugin_abi.h"

namespace h2 {

namespace detail {
class PluginHandle;
}

class DeviceBuffer;
class PinnedHostBuffer;
class Stream;
class Event;

enum class DeviceKind { unknown, cpu, gpu, npu };
std::string_view device_kind_name(DeviceKind kind);

struct DeviceProperties {
  std::string name;
  std::string vendor;
  std::string bus_id;  // "" when none
  DeviceKind kind = DeviceKind::unknown;
  uint32_t compute_units = 0;
  uint64_t total_memory_bytes = 0;
  double memory_bandwidth_bytes_per_s = 0;  // 0: unknown
  std::map<DType, double> peak_flops;       // only dtypes with a known peak
  std::vector<DType> supported_dtypes;
  // Memory a NIC may read and write directly (DiComm's device-direct path).
  bool nic_direct_host = false;
  bool nic_direct_cuda = false;
  bool nic_direct_dmabuf = false;
  bool host_accessible = false;  // host code may dereference device pointers
};

// What a plugin declares about one operator on a device.
struct OpCapability {
  std::vector<DType> dtypes;   // dtypes of the operator's float tensors
  bool strided = false;        // accepts tensors of any strides
  bool deterministic = false;  // bit-identical results run to run
};

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// Where device memory is, for another process of the same node (Device::export_memory).
struct MemoryExport {
  H2_MemHandle handle{};  // plain bytes: send them to the other process as they are
  uint64_t offset = 0;    // of the exported pointer within the region the handle names
};

// A range of device memory exported as a dma-buf (Device::export_dmabuf, ABI 1.7), for a NIC to
// register. Owns the file descriptor and closes it when destroyed; move-only.
class DmaBuf {
 public:
  DmaBuf() = default;
  DmaBuf(int fd, uint64_t offset, size_t bytes) : fd_(fd), offset_(offset), bytes_(bytes) {}
  ~DmaBuf();
  DmaBuf(DmaBuf&& other) noexcept;
  DmaBuf& operator=(DmaBuf&& other) noexcept;
  DmaBuf(const DmaBuf&) = delete;
  DmaBuf& operator=(const DmaBuf&) = delete;

  int fd() const { return fd_; }
  uint64_t offset() const { return offset_; }  // of the range's first byte within the dma-buf
  size_t bytes() const { return bytes_; }      // the range's length

 private:
  int fd_ = -1;
  uint64_t offset_ = 0;
  size_t bytes_ = 0;
};

// Hints for Device::create_stream (H2_StreamFlags). They never change results or stream order.
struct StreamOptions {
  // The caller waits for the stream's work right after enqueuing it: a plugin computing on host
  // threads may run the work on the enqueuing thread, so enqueuing (a wait included) may block.
  bool host_inline = false;
};

class Device {
 public:
  Device(std::shared_ptr<detail::PluginHandle> plugin, int index, DeviceProperties properties);

  const std::string& plugin_name() const;
  int index() const { return index_; }
  std::string label() const;  // "cpu-reference:1"
  const DeviceProperties& properties() const { return *properties_; }

  MemoryInfo memory_info() const;
  // The operator's capability, or nullopt when the plugin does not provide it.
  std::optional<OpCapability> op_capability(H2_Op op) const;

  // Allocates device memory from the plugin; throws h2::Error (H2_STATUS_OUT_OF_MEMORY names what is
  // free). Freeing it waits for the work queued on every stream: for long-lived buffers.
  DeviceBuffer allocate(size_t bytes) const;
  // Memory for work on `stream` (a stream of this device) from the device's caching allocator
  // (h2/memory.hpp): freeing it never waits. Work on another stream that uses it must be declared
  // with DeviceBuffer::record_stream.
  DeviceBuffer allocate(size_t bytes, const Stream& stream) const;
  // Pinned host memory from this device's plugin, for fast copies and NIC registration.
  PinnedHostBuffer allocate_pinned_host(size_t bytes) const;
  // A new stream. `options` are hints (H2_StreamFlags); a plugin without stream_create_with_flags
  // (ABI 1.2) gives a plain stream.
  Stream create_stream(StreamOptions options = {}) const;
  Event create_event(bool timing = true) const;

  // Device memory shared between processes of one node (ABI 1.3): whether the plugin has it at all;
  // a handle for a region holding `buffer`'s byte `offset` (its allocation, or more: see mem_export);
  // and, in another process, that region opened for this device, as a buffer that closes it when
  // destroyed. Throws h2::Error:
  // H2_STATUS_UNSUPPORTED when the plugin cannot (saying why), INVALID_ARGUMENT for a foreign handle.
  bool can_share_memory() const;
  MemoryExport export_memory(const DeviceBuffer& buffer, size_t offset = 0) const;
  DeviceBuffer import_memory(const H2_MemHandle& handle) const;

  // Device memory a NIC registers itself (ABI 1.7): whether the plugin has the slot at all, and
  // `bytes` of `buffer` from byte `offset` as a dma-buf. Throws h2::Error: INVALID_ARGUMENT for a
  // range outside the buffer, H2_STATUS_UNSUPPORTED when the plugin cannot here (saying why).
  bool can_export_dmabuf() const;
  DmaBuf export_dmabuf(const DeviceBuffer& buffer, size_t offset, size_t bytes) const;

  bool operator==(const Device& other) const;
  bool same_plugin(const Device& other) const { return plugin_ == other.plugin_; }

  const std::shared_ptr<detail::PluginHandle>& plugin() const { return plugin_; }
  // The plugin's raw C table, for conformance tests and tools that must call it directly (for
  // example to check how a plugin answers an invalid call). Framework code uses the C++ API.
  const H2_PluginApi& plugin_api() const;

 private:
  std::shared_ptr<detail::PluginHandle> plugin_;
  int index_;
  std::shared_ptr<const DeviceProperties> properties_;
};

}  // namespace h2
