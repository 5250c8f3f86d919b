#include "runtime.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "acl_error.hpp"
#include "plugin_error.hpp"

namespace h2::ascend {

using h2::plugin::fail;

namespace {

// Public figures for the SoCs AscendCL names, where Huawei or its partners published them (dense
// FLOP/s of the Cube unit, HBM bandwidth); 0 where nothing public is known. The planner measures
// devices anyway (`h2 train --profile`); these only seed it.
struct SocFigures {
  const char* prefix;
  uint32_t ai_cores;
  double f16_flops, bf16_flops, bandwidth;
};
constexpr SocFigures kSocs[] = {
    {"Ascend910B1", 24, 0, 0, 0}, {"Ascend910B2", 24, 0, 0, 0},         {"Ascend910B3", 20, 313e12, 313e12, 1.6e12},
    {"Ascend910B4", 20, 0, 0, 0}, {"Ascend910", 32, 256e12, 0, 1.2e12},  // the first 910 (no bf16)
};

const SocFigures* figures_for(const std::string& soc) {
  for (const SocFigures& figures : kSocs)
    if (soc.rfind(figures.prefix, 0) == 0) return &figures;
  return nullptr;
}

}  // namespace

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> slot;
  return slot;
}

Runtime& runtime() {
  if (!runtime_slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is not initialized");
  return *runtime_slot();
}

Runtime::Runtime(const H2_InitArgs& /*args*/) : acl_(std::make_unique<AclLibrary>()) {
  aclnn_ = std::make_unique<AclnnLibrary>();
  const aclError init = acl_->aclInit(nullptr);
  if (init != ACL_SUCCESS && init != ACL_ERROR_REPEAT_INITIALIZE) acl_check(*acl_, init, "aclInit");
  uint32_t count = 0;
  const aclError counted = acl_->aclrtGetDeviceCount(&count);
  if (counted == ACL_ERROR_RT_NO_DEVICE || (counted == ACL_SUCCESS && count == 0)) {
    const char* detail = acl_->aclGetRecentErrMsg();
    acl_->aclFinalize();
    fail(H2_STATUS_NO_DEVICE, "no Ascend device: the CANN runtime (" + acl_->library.path() + ") finds none" +
                                  (detail && *detail ? std::string(" (") + detail + ")" : "") +
                                  "; check the driver with npu-smi info, and ASCEND_RT_VISIBLE_DEVICES");
  }
  acl_check(*acl_, counted, "aclrtGetDeviceCount");
  for (int32_t d = 0; d < static_cast<int32_t>(count); ++d) {
    H2_ACL(*acl_, aclrtSetDevice, d);
    // Fixed summation orders, so that the capability's `deterministic` is true on hardware too.
    H2_ACL(*acl_, aclrtCtxSetSysParamOpt, ACL_OPT_DETERMINISTIC, 1);
    DeviceInfo info;
    const char* soc = acl_->aclrtGetSocName();
    info.soc = soc != nullptr ? soc : "Ascend (unknown SoC)";
    size_t free_bytes = 0, total_bytes = 0;
    H2_ACL(*acl_, aclrtGetMemInfo, ACL_HBM_MEM, &free_bytes, &total_bytes);
    info.total_memory = total_bytes;
    devices_.push_back(info);
    callback_threads_.push_back(std::make_unique<CallbackThread>(*acl_, d));
  }
  staging_runtime_ = std::make_unique<AclStagingRuntime>(*acl_);
  staging_ = std::make_unique<h2::plugin::HostStaging>(*staging_runtime_);
}

Runtime::~Runtime() {
  // The core has destroyed every stream and freed every allocation; what is left is the plugin's.
  for (int32_t d = 0; d < device_count(); ++d) release_freed_blocks(d, true);
  staging_.reset();
  callback_threads_.clear();
  for (int32_t d = 0; d < device_count(); ++d) acl_->aclrtResetDevice(d);
  acl_->aclFinalize();
  h2::plugin::DeviceBinding::forget();
}

void Runtime::check_device(int32_t device) const {
  if (device < 0 || device >= device_count())
    fail(H2_STATUS_INVALID_ARGUMENT,
         "device " + std::to_string(device) + " does not exist (" + std::to_string(device_count()) + " devices)");
}

void Runtime::bind(int32_t device) const {
  check_device(device);
  binding_.bind(device, [&](int32_t d) { H2_ACL(*acl_, aclrtSetDevice, d); });
}

void Runtime::properties(int32_t device, H2_DeviceProperties& props) const {
  check_device(device);
  if (props.struct_size < H2_DEVICE_PROPERTIES_SIZE_1_0)
    fail(H2_STATUS_INVALID_ARGUMENT, "props->struct_size is smaller than ABI 1.0's H2_DeviceProperties");
  const DeviceInfo& info = devices_[static_cast<size_t>(device)];
  std::snprintf(props.name, sizeof props.name, "%s", info.soc.c_str());
  std::snprintf(props.vendor, sizeof props.vendor, "%s", "Huawei");
  props.bus_id[0] = '\0';
  props.kind = H2_DEVICE_KIND_NPU;
  props.total_memory_bytes = info.total_memory;
  if (const SocFigures* figures = figures_for(info.soc)) {
    props.compute_units = figures->ai_cores;
    props.memory_bandwidth_bytes_per_s = figures->bandwidth;
    props.peak_flops[H2_DTYPE_F16] = figures->f16_flops;
    props.peak_flops[H2_DTYPE_BF16] = figures->bf16_flops;
  }
  props.supported_dtypes =
      (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16) | (1u << H2_DTYPE_I32) | (1u << H2_DTYPE_I64);
  props.nic_direct_memory = H2_NIC_DIRECT_HOST;
  props.host_accessible = 0;
}

void Runtime::memory_info(int32_t device, uint64_t& free_bytes, uint64_t& total_bytes) const {
  bind(device);
  size_t free_now = 0, total = 0;
  H2_ACL(*acl_, aclrtGetMemInfo, ACL_HBM_MEM, &free_now, &total);
  free_bytes = free_now;
  total_bytes = total;
}

std::string Runtime::device_name(int32_t device) const {
  return devices_[static_cast<size_t>(device)].soc;
}

bool Runtime::vendor_malloc(size_t bytes, void** ptr, std::string& why) {
  const aclError code = acl_->aclrtMalloc(ptr, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
  if (code == ACL_ERROR_RT_MEMORY_ALLOCATION || code == ACL_ERROR_BAD_ALLOC) {
    const char* detail = acl_->aclGetRecentErrMsg();
    why = detail != nullptr ? detail : "aclrtMalloc failed";
    return false;
  }
  acl_check(*acl_, code, "aclrtMalloc");
  return true;
}

void Runtime::vendor_free(void* ptr) {
  H2_ACL(*acl_, aclrtFree, ptr);
}

void* Runtime::vendor_host_malloc(size_t bytes) {
  void* ptr = nullptr;
  const aclError code = acl_->aclrtMallocHost(&ptr, bytes);
  if (code == ACL_ERROR_BAD_ALLOC || code == ACL_ERROR_RT_MEMORY_ALLOCATION) return nullptr;
  acl_check(*acl_, code, "aclrtMallocHost");
  return ptr;
}

void Runtime::vendor_host_free(void* ptr) {
  H2_ACL(*acl_, aclrtFreeHost, ptr);
}

aclrtEvent Runtime::event_create() {
  aclrtEvent event = nullptr;
  H2_ACL(*acl_, aclrtCreateEventWithFlag, &event, ACL_EVENT_SYNC);
  return event;
}

void Runtime::event_destroy(aclrtEvent event) noexcept {
  acl_->aclrtDestroyEvent(event);
}

void Runtime::event_record(aclrtEvent event, Stream& stream) {
  H2_ACL(*acl_, aclrtRecordEvent, event, stream.stream);
}

bool Runtime::event_done(aclrtEvent event) noexcept {
  aclrtEventRecordedStatus status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return acl_->aclrtQueryEventStatus(event, &status) == ACL_SUCCESS && status == ACL_EVENT_RECORDED_STATUS_COMPLETE;
}

void Runtime::event_wait(aclrtEvent event) noexcept {
  acl_->aclrtSynchronizeEvent(event);
}

void Runtime::stream_wait(Stream& stream, aclrtEvent event) {
  H2_ACL(*acl_, aclrtStreamWaitEvent, stream.stream, event);
}

// Waits for the work queued on every stream of `device`, or of every device with kAllDevices. A
// stream's asynchronous error stays the stream's to report (stream_synchronize): a free or close
// that waits must not fail because of it.
void Runtime::wait_for_streams(int32_t device) {
  for (const auto& stream : streams_.snapshot()) {
    if (device != kAllDevices && stream->device != device) continue;
    bind(stream->device);
    acl_->aclrtSynchronizeStream(stream->stream);
  }
}

namespace {

// What mem_export writes into the ABI's 128-byte handle.
struct AscendMemHandle {
  char magic[8];
  uint64_t bytes;
  char key[ACL_RT_IPC_MEM_KEY_LENGTH];
};
static_assert(sizeof(AscendMemHandle) <= sizeof(H2_MemHandle));
constexpr char kHandleMagic[8] = "H2ASCND";

}  // namespace

void Runtime::require_ipc() const {
  if (!acl_->has_ipc())
    fail(H2_STATUS_UNSUPPORTED, "the CANN runtime " + acl_->library.path() +
                                    " has no aclrtIpcMem* functions (they came after CANN 8.0.0): device memory "
                                    "cannot be shared between processes here");
}

void Runtime::before_free(Allocation& allocation) {
  if (allocation.ipc_key.empty() || allocation.imported) return;
  H2_ACL(*acl_, aclrtIpcMemClose, allocation.ipc_key.c_str());
  allocation.ipc_key.clear();
}

void Runtime::export_memory(int32_t device, const void* ptr, H2_MemHandle& handle, uint64_t& offset) {
  check_device(device);
  require_ipc();
  bind(device);
  std::lock_guard lock(book_.mutex());
  const char* address = static_cast<const char*>(ptr);
  const auto [start, allocation] = book_.holding_locked(ptr);
  if (allocation == nullptr || allocation->device != device)
    fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not inside a live allocation of device " + std::to_string(device));
  if (allocation->imported)
    fail(H2_STATUS_UNSUPPORTED, "memory imported from another process cannot be exported again");
  if (allocation->ipc_key.empty()) {
    char key[ACL_RT_IPC_MEM_KEY_LENGTH] = {};
    H2_ACL(*acl_, aclrtIpcMemGetExportKey, const_cast<char*>(start), allocation->bytes, key, sizeof key,
           ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION);  // the ABI does not know its importers
    allocation->ipc_key = key;
  }
  AscendMemHandle written{};
  std::memcpy(written.magic, kHandleMagic, sizeof written.magic);
  written.bytes = allocation->bytes;
  std::snprintf(written.key, sizeof written.key, "%s", allocation->ipc_key.c_str());
  handle = H2_MemHandle{};
  std::memcpy(handle.bytes, &written, sizeof written);
  offset = static_cast<uint64_t>(address - start);
}

void* Runtime::import_memory(int32_t device, const H2_MemHandle& handle, uint64_t& bytes) {
  check_device(device);
  require_ipc();
  AscendMemHandle read{};
  std::memcpy(&read, handle.bytes, sizeof read);
  if (std::memcmp(read.magic, kHandleMagic, sizeof read.magic) != 0 || read.key[sizeof read.key - 1] != '\0')
    fail(H2_STATUS_INVALID_ARGUMENT, "the handle is not one of the Ascend plugin's");
  bind(device);
  void* ptr = nullptr;
  const aclError code = acl_->aclrtIpcMemImportByKey(&ptr, read.key, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT);
  if (code == ACL_ERROR_RT_NO_PERMISSION) {
    const char* detail = acl_->aclGetRecentErrMsg();
    fail(H2_STATUS_UNSUPPORTED,
         std::string("the memory cannot be opened here") + (detail ? std::string(": ") + detail : ""));
  }
  acl_check(*acl_, code, "aclrtIpcMemImportByKey");
  book_.add(ptr, Allocation{device, read.bytes, read.key, true});
  bytes = read.bytes;
  return ptr;
}

void Runtime::close_import(int32_t device, void* ptr) {
  check_device(device);
  std::string key;
  {
    std::lock_guard lock(book_.mutex());
    const Allocation* allocation = book_.starting_at_locked(ptr);
    if (allocation == nullptr || !allocation->imported || allocation->device != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not memory imported on device " + std::to_string(device));
    key = allocation->ipc_key;
    book_.erase_locked(ptr);
  }
  wait_for_streams(device);  // as mem_free: queued work that may use it completes first
  H2_ACL(*acl_, aclrtIpcMemClose, key.c_str());
}

H2_Stream* Runtime::create_stream(int32_t device) {
  bind(device);
  auto stream = std::make_shared<Stream>();
  stream->device = device;
  stream->id = next_stream_id_++;
  H2_ACL(*acl_, aclrtCreateStream, &stream->stream);
  try {
    callback_threads_[static_cast<size_t>(device)]->subscribe(stream->stream);
  } catch (...) {
    acl_->aclrtDestroyStream(stream->stream);
    throw;
  }
  return streams_.add(std::move(stream));
}

void Runtime::destroy_stream(H2_Stream* handle) {
  auto stream = streams_.take(handle);
  bind(stream->device);
  // AscendCL destroys only a drained stream; the ABI's stream_destroy waits, and its errors are the
  // stream's business, reported by synchronize: none is left to report once it is gone.
  acl_->aclrtSynchronizeStream(stream->stream);
  callback_threads_[static_cast<size_t>(stream->device)]->unsubscribe(stream->stream);
  H2_ACL(*acl_, aclrtDestroyStream, stream->stream);
}

void Runtime::synchronize(Stream& stream) {
  bind(stream.device);
  const aclError code = acl_->aclrtSynchronizeStream(stream.stream);
  std::lock_guard lock(stream.mutex);
  if (code != ACL_SUCCESS && stream.sticky_status == H2_STATUS_OK) {
    const char* detail = acl_->aclGetRecentErrMsg();
    stream.sticky_status = status_of(code);
    stream.sticky = "work on the stream failed with AscendCL error " + std::to_string(code) +
                    (detail != nullptr && *detail ? std::string(": ") + detail : std::string());
  }
  if (stream.sticky_status != H2_STATUS_OK) fail(stream.sticky_status, stream.sticky);
}

H2_Status Runtime::query(Stream& stream) {
  {
    std::lock_guard lock(stream.mutex);
    if (stream.sticky_status != H2_STATUS_OK) fail(stream.sticky_status, stream.sticky);
  }
  bind(stream.device);
  aclrtStreamStatus status = ACL_STREAM_STATUS_NOT_READY;
  H2_ACL(*acl_, aclrtStreamQuery, stream.stream, &status);
  if (status != ACL_STREAM_STATUS_COMPLETE) return H2_STATUS_NOT_READY;
  synchronize(stream);  // drained already: this only collects an error of its work
  return H2_STATUS_OK;
}

H2_Event* Runtime::create_event(int32_t device, uint32_t flags) {
  bind(device);
  auto event = std::make_shared<Event>();
  event->device = device;
  event->timing = (flags & H2_EVENT_DISABLE_TIMING) == 0;
  H2_ACL(*acl_, aclrtCreateEventWithFlag, &event->event, event->timing ? ACL_EVENT_TIME_LINE : ACL_EVENT_SYNC);
  return events_.add(std::move(event));
}

void Runtime::destroy_event(H2_Event* handle) {
  auto event = events_.take(handle);
  bind(event->device);
  H2_ACL(*acl_, aclrtDestroyEvent, event->event);
}

}  // namespace h2::ascend
