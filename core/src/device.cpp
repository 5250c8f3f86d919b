#include "h2/device.hpp"

#include <unistd.h>

#include <utility>

#include "h2/buffer.hpp"
#include "h2/stream.hpp"
#include "plugin_handle.hpp"

namespace h2 {

std::string_view device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cpu: return "cpu";
    case DeviceKind::gpu: return "gpu";
    case DeviceKind::npu: return "npu";
    case DeviceKind::unknown: break;
  }
  return "unknown";
}

Device::Device(std::shared_ptr<detail::PluginHandle> plugin, int index, DeviceProperties properties)
    : plugin_(std::move(plugin)),
      index_(index),
      properties_(std::make_shared<const DeviceProperties>(std::move(properties))) {}

const std::string& Device::plugin_name() const {
  return plugin_->name();
}

const H2_PluginApi& Device::plugin_api() const {
  return plugin_->api();
}

std::string Device::label() const {
  return plugin_->name() + ":" + std::to_string(index_);
}

bool Device::operator==(const Device& other) const {
  return plugin_ == other.plugin_ && index_ == other.index_;
}

MemoryInfo Device::memory_info() const {
  MemoryInfo info;
  auto slot = plugin_->require(plugin_->api().mem_info, "mem_info");
  plugin_->check(slot(index_, &info.free_bytes, &info.total_bytes), "mem_info(device " + std::to_string(index_) + ")");
  return info;
}

std::optional<OpCapability> Device::op_capability(H2_Op op) const {
  const H2_OpCapability& raw = plugin_->capability(index_, op);
  if (raw.struct_size == 0) return std::nullopt;
  // The slot must exist too: a capability for an operator without a slot is not a capability.
  if (!plugin_->has_op_slot(op)) return std::nullopt;
  OpCapability capability;
  for (DType dtype : kAllDTypes)
    if (raw.dtypes & (uint64_t{1} << static_cast<uint32_t>(dtype))) capability.dtypes.push_back(dtype);
  capability.strided = raw.strided_tensors != 0;
  capability.deterministic = raw.deterministic != 0;
  return capability;
}

DeviceBuffer Device::allocate(size_t bytes) const {
  if (bytes == 0) throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": cannot allocate 0 bytes");
  void* data = nullptr;
  plugin_->check(plugin_->api().mem_alloc(index_, bytes, &data),
                 "mem_alloc(device " + std::to_string(index_) + ", " + std::to_string(bytes) + " bytes)");
  return DeviceBuffer(*this, data, bytes);
}

DeviceBuffer Device::allocate(size_t bytes, const Stream& stream) const {
  if (!(stream.device() == *this))
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                label() + ": cannot allocate memory for a stream of another device (" + stream.device().label() + ")");
  const detail::CachingAllocator::Allocated memory = plugin_->allocator(index_).allocate(bytes, stream.handle());
  // mem_alloc_async is work on the stream (CUDA may order it after another stream's free): count it,
  // so that Stream::ready() asks the plugin again instead of answering from its counters.
  if (memory.enqueued) stream.native();
  return DeviceBuffer::stream_ordered(*this, memory.ptr, bytes, memory.token);
}

PinnedHostBuffer Device::allocate_pinned_host(size_t bytes) const {
  if (bytes == 0) throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": cannot allocate 0 bytes");
  void* data = nullptr;
  auto slot = plugin_->require(plugin_->api().host_alloc, "host_alloc");
  plugin_->check(slot(bytes, &data), "host_alloc(" + std::to_string(bytes) + " bytes)");
  return PinnedHostBuffer(*this, data, bytes);
}

Stream Device::create_stream(StreamOptions options) const {
  H2_Stream* native = nullptr;
  const uint32_t flags = options.host_inline ? H2_STREAM_HOST_INLINE : H2_STREAM_DEFAULT;
  const auto with_flags = plugin_->api().stream_create_with_flags;
  if (flags != H2_STREAM_DEFAULT && with_flags != nullptr)
    plugin_->check(with_flags(index_, flags, &native), "stream_create_with_flags(device " + std::to_string(index_) +
                                                           ", flags " + std::to_string(flags) + ")");
  else
    plugin_->check(plugin_->api().stream_create(index_, &native),
                   "stream_create(device " + std::to_string(index_) + ")");
  return Stream(*this, native);
}

bool Device::can_share_memory() const {
  return plugin_->api().mem_export != nullptr;  // the loader checked that the three slots go together
}

MemoryExport Device::export_memory(const DeviceBuffer& buffer, size_t offset) const {
  if (offset >= buffer.size())
    throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": cannot export byte " + std::to_string(offset) + " of a " +
                                                std::to_string(buffer.size()) + "-byte buffer");
  MemoryExport out;
  auto slot = plugin_->require(plugin_->api().mem_export, "mem_export");
  plugin_->check(slot(index_, static_cast<const char*>(buffer.data()) + offset, &out.handle, &out.offset),
                 "mem_export(device " + std::to_string(index_) + ")");
  return out;
}

bool Device::can_export_dmabuf() const {
  return plugin_->api().mem_export_dmabuf != nullptr;
}

DmaBuf Device::export_dmabuf(const DeviceBuffer& buffer, size_t offset, size_t bytes) const {
  if (bytes == 0 || offset > buffer.size() || bytes > buffer.size() - offset)
    throw Error(H2_STATUS_INVALID_ARGUMENT, label() + ": cannot export bytes [" + std::to_string(offset) + ", " +
                                                std::to_string(offset + bytes) + ") of a " +
                                                std::to_string(buffer.size()) + "-byte buffer as a dma-buf");
  auto slot = plugin_->require(plugin_->api().mem_export_dmabuf, "mem_export_dmabuf");
  int32_t fd = -1;
  uint64_t within = 0;
  plugin_->check(slot(index_, static_cast<const char*>(buffer.data()) + offset, bytes, &fd, &within),
                 "mem_export_dmabuf(device " + std::to_string(index_) + ", " + std::to_string(bytes) + " bytes)");
  if (fd < 0)
    throw Error(H2_STATUS_INTERNAL, label() + ": mem_export_dmabuf reported success without a file descriptor");
  return DmaBuf(fd, within, bytes);
}

DmaBuf::~DmaBuf() {
  if (fd_ >= 0) ::close(fd_);
}

DmaBuf::DmaBuf(DmaBuf&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), offset_(other.offset_), bytes_(other.bytes_) {}

DmaBuf& DmaBuf::operator=(DmaBuf&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
    bytes_ = other.bytes_;
  }
  return *this;
}

DeviceBuffer Device::import_memory(const H2_MemHandle& handle) const {
  void* data = nullptr;
  uint64_t bytes = 0;
  auto slot = plugin_->require(plugin_->api().mem_import, "mem_import");
  plugin_->check(slot(index_, &handle, &data, &bytes), "mem_import(device " + std::to_string(index_) + ")");
  return DeviceBuffer::imported(*this, data, static_cast<size_t>(bytes));
}

Event Device::create_event(bool timing) const {
  H2_Event* native = nullptr;
  plugin_->check(plugin_->api().event_create(index_, timing ? H2_EVENT_DEFAULT : H2_EVENT_DISABLE_TIMING, &native),
                 "event_create(device " + std::to_string(index_) + ")");
  return Event(*this, native);
}

}  // namespace h2
