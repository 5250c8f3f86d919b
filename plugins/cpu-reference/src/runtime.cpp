#include "runtime.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common.hpp"

namespace h2::cpu_reference {

namespace {

void copy_string(char* dst, size_t capacity, const std::string& src) {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

constexpr size_t kHostAlignment = 4096;

}  // namespace

Runtime::Runtime(const Config& config, const H2_InitArgs& args)
    : config_(config),
      log_fn_(args.log),
      log_user_data_(args.log_user_data),
      log_level_(args.log_level),
      pool_(config.threads) {
  for (size_t i = 0; i < config.memory_bytes.size(); ++i)
    memory_.push_back(std::make_unique<DeviceMemory>(static_cast<int>(i), config.memory_bytes[i], config.strict));

  std::string summary = std::to_string(memory_.size()) + " device(s):";
  for (size_t i = 0; i < memory_.size(); ++i) summary += (i ? ", " : " ") + format_bytes(config.memory_bytes[i]);
  summary += "; " + std::to_string(config.threads) + " compute thread(s)";
  summary += config.strict ? "; strict mode on (device memory not host-accessible)" : "";
  summary += config.blocking ? "; blocking streams (every call completes before it returns)" : "";
  log(H2_LOG_INFO, summary);
}

Runtime::~Runtime() {
  std::lock_guard lock(mutex_);
  if (streams_.size() > 0 || events_.size() > 0 || !host_allocations_.empty())
    log(H2_LOG_WARNING, "shutdown with " + std::to_string(streams_.size()) + " stream(s), " +
                            std::to_string(events_.size()) + " event(s) and " +
                            std::to_string(host_allocations_.size()) + " pinned host allocation(s) still live");
  streams_.clear();  // joins the workers after they drain
  events_.clear();
  for (void* p : host_allocations_) std::free(p);
}

void Runtime::log(H2_LogLevel level, const std::string& message) const {
  if (log_fn_ != nullptr && static_cast<uint32_t>(level) <= log_level_) log_fn_(log_user_data_, level, message.c_str());
}

void Runtime::check_device(int device) const {
  if (device < 0 || device >= device_count())
    fail(H2_STATUS_INVALID_ARGUMENT, "device " + std::to_string(device) + " does not exist (the plugin has " +
                                         std::to_string(device_count()) + ")");
}

void Runtime::properties(int device, H2_DeviceProperties& props) const {
  check_device(device);
  if (props.struct_size < H2_DEVICE_PROPERTIES_SIZE_1_0)
    fail(H2_STATUS_INVALID_ARGUMENT, "props->struct_size " + std::to_string(props.struct_size) +
                                         " is smaller than ABI 1.0's " + std::to_string(H2_DEVICE_PROPERTIES_SIZE_1_0));
  // Every field this plugin knows belongs to ABI 1.0, so all of them fit.
  copy_string(props.name, sizeof props.name, "cpu-reference");
  copy_string(props.vendor, sizeof props.vendor, "H2 (CPU reference)");
  props.bus_id[0] = '\0';
  props.kind = H2_DEVICE_KIND_CPU;
  props.compute_units = std::max(1u, std::thread::hardware_concurrency());
  props.total_memory_bytes = memory_[static_cast<size_t>(device)]->capacity();
  // Speed is not a property of the reference; `h2 profile` measures it. 0 means unknown.
  props.memory_bandwidth_bytes_per_s = 0;
  for (double& flops : props.peak_flops) flops = 0;
  props.supported_dtypes =
      (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16) | (1u << H2_DTYPE_I32) | (1u << H2_DTYPE_I64);
  props.nic_direct_memory = H2_NIC_DIRECT_HOST;
  if (memory_[static_cast<size_t>(device)]->exports_dmabuf()) props.nic_direct_memory |= H2_NIC_DIRECT_DMABUF;
  props.host_accessible = config_.strict ? 0 : 1;
}

DeviceMemory& Runtime::memory(int device) const {
  check_device(device);
  return *memory_[static_cast<size_t>(device)];
}

DeviceMemory* Runtime::owner_of(const void* ptr) const {
  for (const auto& memory : memory_)
    if (memory->contains(ptr)) return memory.get();
  return nullptr;
}

void* Runtime::host_alloc(size_t bytes) {
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
  const size_t rounded = (bytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (p == nullptr) fail(H2_STATUS_OUT_OF_MEMORY, "cannot allocate " + format_bytes(bytes) + " of pinned host memory");
  std::lock_guard lock(mutex_);
  host_allocations_.insert(p);
  return p;
}

void Runtime::host_free(void* ptr) {
  {
    std::lock_guard lock(mutex_);
    if (host_allocations_.count(ptr) == 0)
      fail(H2_STATUS_INVALID_ARGUMENT, "pointer was not returned by host_alloc (or was already freed)");
  }
  wait_all_streams();
  std::lock_guard lock(mutex_);
  if (host_allocations_.erase(ptr) == 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "pointer was freed concurrently by another thread");
  std::free(ptr);
}

H2_Stream* Runtime::create_stream(int device, bool host_inline) {
  check_device(device);
  return streams_.add(std::make_shared<Stream>(device, config_.blocking || host_inline));
}

std::shared_ptr<Stream> Runtime::stream(H2_Stream* handle) const {
  return streams_.get(handle);
}

void Runtime::destroy_stream(H2_Stream* handle) {
  std::shared_ptr<Stream> stream = streams_.take(handle);
  stream->wait_idle();
  // The worker is joined when the last reference (possibly a concurrent call's) goes away.
}

H2_Event* Runtime::create_event(int device, uint32_t flags) {
  check_device(device);
  if ((flags & ~static_cast<uint32_t>(H2_EVENT_DISABLE_TIMING)) != 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "unknown event flags " + std::to_string(flags));
  return events_.add(std::make_shared<Event>(device, (flags & H2_EVENT_DISABLE_TIMING) == 0));
}

std::shared_ptr<Event> Runtime::event(H2_Event* handle) const {
  return events_.get(handle);
}

void Runtime::destroy_event(H2_Event* handle) {
  events_.take(handle);
}

void Runtime::wait_all_streams() const {
  for (const auto& stream : streams_.snapshot()) stream->wait_idle();
}

}  // namespace h2::cpu_reference
