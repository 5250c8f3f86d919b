#include "runtime.hpp"

#include <cstdio>
#include <cstring>

#include "mlu_error.hpp"
#include "plugin_error.hpp"

namespace h2::mlu {

using h2::plugin::fail;

namespace {

// Cambricon's published figures for its training cards (dense FLOP/s, memory bandwidth; MLU370-X8 is
// a card of two chips, its figures the card's), 0 where nothing public is known. The planner measures
// devices anyway (`h2 train --profile`); these only seed it.
struct ModelFigures {
  const char* prefix;
  double f32_flops, f16_flops, bf16_flops, bandwidth;
};
constexpr ModelFigures kModels[] = {
    {"MLU370-X8", 24e12, 96e12, 96e12, 614.4e9},
    {"MLU370-X4", 24e12, 96e12, 96e12, 307.2e9},
    {"MLU590", 0, 0, 0, 0},
};

const ModelFigures* figures_for(const std::string& name) {
  for (const ModelFigures& figures : kModels)
    if (name.rfind(figures.prefix, 0) == 0) return &figures;
  return nullptr;
}

// What mem_export writes into the ABI's 128-byte handle.
struct MluMemHandle {
  char magic[8];
  uint64_t bytes;
  cnrtIpcMemHandle handle;
};
static_assert(sizeof(MluMemHandle) <= sizeof(H2_MemHandle));
constexpr char kHandleMagic[8] = "H2MLU01";

}  // namespace

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> slot;
  return slot;
}

Runtime& runtime() {
  if (!runtime_slot()) fail(H2_STATUS_INVALID_ARGUMENT, "the plugin is not initialized");
  return *runtime_slot();
}

Runtime::Runtime(const H2_InitArgs& /*args*/)
    : cnrt_(std::make_unique<CnrtLibrary>()), cnnl_(std::make_unique<CnnlLibrary>()) {
  unsigned int count = 0;
  const cnrtRet_t counted = cnrt_->cnrtGetDeviceCount(&count);
  if (counted == cnrtErrorNoDevice || counted == cnrtErrorInit || (counted == cnrtSuccess && count == 0))
    fail(H2_STATUS_NO_DEVICE,
         "no MLU device: " +
             (counted == cnrtSuccess ? "the Neuware runtime (" + cnrt_->library.path() + ") finds none"
                                     : cnrt_message(*cnrt_, counted, "cnrtGetDeviceCount")) +
             "; check the driver with cnmon, and MLU_VISIBLE_DEVICES");
  cnrt_check(*cnrt_, counted, "cnrtGetDeviceCount");
  for (int32_t d = 0; d < static_cast<int32_t>(count); ++d) {
    H2_CNRT(*cnrt_, cnrtSetDevice, d);
    DeviceInfo info;
    cnrtDeviceProp_t prop{};
    H2_CNRT(*cnrt_, cnrtGetDeviceProperties, &prop, d);
    prop.name[sizeof prop.name - 1] = '\0';
    info.name = prop.name[0] != '\0' ? prop.name : "MLU (unknown model)";
    int clusters = 0, cores = 0;
    H2_CNRT(*cnrt_, cnrtDeviceGetAttribute, &clusters, cnrtAttrClusterCount, d);
    H2_CNRT(*cnrt_, cnrtDeviceGetAttribute, &cores, cnrtAttrMcorePerCluster, d);
    info.cores = static_cast<uint32_t>(clusters * cores);
    size_t free_bytes = 0, total_bytes = 0;
    H2_CNRT(*cnrt_, cnrtMemGetInfo, &free_bytes, &total_bytes);
    info.total_memory = total_bytes;
    devices_.push_back(info);
  }
  h2::plugin::DeviceBinding::forget();
  staging_runtime_ = std::make_unique<CnrtStagingRuntime>(*cnrt_);
  staging_ = std::make_unique<h2::plugin::HostStaging>(*staging_runtime_);
}

Runtime::~Runtime() {
  // The core has destroyed every stream and freed every allocation; what is left is the plugin's.
  for (int32_t d = 0; d < device_count(); ++d) release_freed_blocks(d, true);
  staging_.reset();
  h2::plugin::DeviceBinding::forget();
}

void Runtime::check_device(int32_t device) const {
  if (device < 0 || device >= device_count())
    fail(H2_STATUS_INVALID_ARGUMENT,
         "device " + std::to_string(device) + " does not exist (" + std::to_string(device_count()) + " devices)");
}

void Runtime::bind(int32_t device) const {
  check_device(device);
  binding_.bind(device, [&](int32_t d) { H2_CNRT(*cnrt_, cnrtSetDevice, d); });
}

void Runtime::properties(int32_t device, H2_DeviceProperties& props) const {
  check_device(device);
  if (props.struct_size < H2_DEVICE_PROPERTIES_SIZE_1_0)
    fail(H2_STATUS_INVALID_ARGUMENT, "props->struct_size is smaller than ABI 1.0's H2_DeviceProperties");
  const DeviceInfo& info = devices_[static_cast<size_t>(device)];
  std::snprintf(props.name, sizeof props.name, "%s", info.name.c_str());
  std::snprintf(props.vendor, sizeof props.vendor, "%s", "Cambricon");
  props.bus_id[0] = '\0';
  props.kind = H2_DEVICE_KIND_NPU;
  props.total_memory_bytes = info.total_memory;
  props.compute_units = info.cores;
  if (const ModelFigures* figures = figures_for(info.name)) {
    props.memory_bandwidth_bytes_per_s = figures->bandwidth;
    props.peak_flops[H2_DTYPE_F32] = figures->f32_flops;
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
  H2_CNRT(*cnrt_, cnrtMemGetInfo, &free_now, &total);
  free_bytes = free_now;
  total_bytes = total;
}

std::string Runtime::device_name(int32_t device) const {
  return devices_[static_cast<size_t>(device)].name;
}

bool Runtime::vendor_malloc(size_t bytes, void** ptr, std::string& why) {
  const cnrtRet_t code = cnrt_->cnrtMalloc(ptr, bytes);
  if (code == cnrtErrorNoMem) {
    why = cnrt_message(*cnrt_, code, "cnrtMalloc");
    cnrt_->cnrtGetLastError();
    return false;
  }
  cnrt_check(*cnrt_, code, "cnrtMalloc");
  return true;
}

void Runtime::vendor_free(void* ptr) {
  H2_CNRT(*cnrt_, cnrtFree, ptr);
}

void* Runtime::vendor_host_malloc(size_t bytes) {
  void* ptr = nullptr;
  const cnrtRet_t code = cnrt_->cnrtHostMalloc(&ptr, bytes);
  if (code == cnrtErrorSysNoMem || code == cnrtErrorNoMem) {
    cnrt_->cnrtGetLastError();
    return nullptr;
  }
  cnrt_check(*cnrt_, code, "cnrtHostMalloc");
  return ptr;
}

void Runtime::vendor_host_free(void* ptr) {
  H2_CNRT(*cnrt_, cnrtFreeHost, ptr);
}

cnrtNotifier_t Runtime::event_create() {
  cnrtNotifier_t notifier = nullptr;
  H2_CNRT(*cnrt_, cnrtNotifierCreateWithFlags, &notifier, CNRT_NOTIFIER_DISABLE_TIMING_SW);
  return notifier;
}

void Runtime::event_destroy(cnrtNotifier_t notifier) noexcept {
  cnrt_->cnrtNotifierDestroy(notifier);
}

void Runtime::event_record(cnrtNotifier_t notifier, Stream& stream) {
  H2_CNRT(*cnrt_, cnrtPlaceNotifier, notifier, stream.queue);
}

bool Runtime::event_done(cnrtNotifier_t notifier) noexcept {
  const cnrtRet_t code = cnrt_->cnrtQueryNotifier(notifier);
  if (code != cnrtSuccess) cnrt_->cnrtGetLastError();
  return code == cnrtSuccess;
}

void Runtime::event_wait(cnrtNotifier_t notifier) noexcept {
  if (cnrt_->cnrtWaitNotifier(notifier) != cnrtSuccess) cnrt_->cnrtGetLastError();
}

void Runtime::stream_wait(Stream& stream, cnrtNotifier_t notifier) {
  H2_CNRT(*cnrt_, cnrtQueueWaitNotifier, notifier, stream.queue, 0);
}

// Waits for the work queued on every stream of `device`, or of every device with kAllDevices. A
// stream's asynchronous error stays the stream's to report (stream_synchronize): a free that waits
// must not fail because of it.
void Runtime::wait_for_streams(int32_t device) {
  for (const auto& stream : streams_.snapshot()) {
    if (device != kAllDevices && stream->device != device) continue;
    bind(stream->device);
    if (cnrt_->cnrtQueueSync(stream->queue) != cnrtSuccess) cnrt_->cnrtGetLastError();
  }
}

void Runtime::export_memory(int32_t device, const void* ptr, H2_MemHandle& handle, uint64_t& offset) {
  check_device(device);
  bind(device);
  std::lock_guard lock(book_.mutex());
  const char* address = static_cast<const char*>(ptr);
  const auto [start, allocation] = book_.holding_locked(ptr);
  if (allocation == nullptr || allocation->device != device)
    fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not inside a live allocation of device " + std::to_string(device));
  if (allocation->imported)
    fail(H2_STATUS_UNSUPPORTED, "memory imported from another process cannot be exported again");
  MluMemHandle written{};
  H2_CNRT(*cnrt_, cnrtAcquireMemHandle, &written.handle, const_cast<char*>(start));
  std::memcpy(written.magic, kHandleMagic, sizeof written.magic);
  written.bytes = allocation->bytes;
  handle = H2_MemHandle{};
  std::memcpy(handle.bytes, &written, sizeof written);
  offset = static_cast<uint64_t>(address - start);
}

void* Runtime::import_memory(int32_t device, const H2_MemHandle& handle, uint64_t& bytes) {
  check_device(device);
  MluMemHandle read{};
  std::memcpy(&read, handle.bytes, sizeof read);
  if (std::memcmp(read.magic, kHandleMagic, sizeof read.magic) != 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "the handle is not one of the MLU plugin's");
  bind(device);
  void* ptr = nullptr;
  const cnrtRet_t code = cnrt_->cnrtMapMemHandle(&ptr, read.handle, 0);
  if (code == cnrtErrorNotSupport || code == cnrtErrorOpsNotPermitted) {
    const std::string why = cnrt_message(*cnrt_, code, "cnrtMapMemHandle");
    cnrt_->cnrtGetLastError();
    fail(H2_STATUS_UNSUPPORTED, "the memory cannot be opened here: " + why);
  }
  cnrt_check(*cnrt_, code, "cnrtMapMemHandle");
  book_.add(ptr, Allocation{device, read.bytes, {}, true});
  bytes = read.bytes;
  return ptr;
}

void Runtime::close_import(int32_t device, void* ptr) {
  check_device(device);
  {
    std::lock_guard lock(book_.mutex());
    const Allocation* allocation = book_.starting_at_locked(ptr);
    if (allocation == nullptr || !allocation->imported || allocation->device != device)
      fail(H2_STATUS_INVALID_ARGUMENT, "the pointer is not memory imported on device " + std::to_string(device));
    book_.erase_locked(ptr);
  }
  wait_for_streams(device);  // as mem_free: queued work that may use it completes first
  bind(device);
  H2_CNRT(*cnrt_, cnrtUnMapMemHandle, ptr);
}

H2_Stream* Runtime::create_stream(int32_t device) {
  bind(device);
  auto stream = std::make_shared<Stream>();
  stream->device = device;
  stream->id = next_stream_id_++;
  H2_CNRT(*cnrt_, cnrtQueueCreate, &stream->queue);
  // The stream's CNNL handle, created on its device and bound to its queue.
  const cnnlStatus_t created = cnnl_->cnnlCreate(&stream->cnnl);
  const cnnlStatus_t bound =
      created == CNNL_STATUS_SUCCESS ? cnnl_->cnnlSetQueue(stream->cnnl, stream->queue) : created;
  if (bound != CNNL_STATUS_SUCCESS) {
    if (created == CNNL_STATUS_SUCCESS) cnnl_->cnnlDestroy(stream->cnnl);
    cnrt_->cnrtQueueDestroy(stream->queue);
    cnnl_check(*cnnl_, bound, created == CNNL_STATUS_SUCCESS ? "cnnlSetQueue" : "cnnlCreate");
  }
  return streams_.add(std::move(stream));
}

void Runtime::destroy_stream(H2_Stream* handle) {
  auto stream = streams_.take(handle);
  bind(stream->device);
  // The ABI's stream_destroy waits for the stream's work; its errors were the stream's to report.
  if (cnrt_->cnrtQueueSync(stream->queue) != cnrtSuccess) cnrt_->cnrtGetLastError();
  cnnl_->cnnlDestroy(stream->cnnl);
  H2_CNRT(*cnrt_, cnrtQueueDestroy, stream->queue);
}

void Runtime::synchronize(Stream& stream) {
  bind(stream.device);
  const cnrtRet_t code = cnrt_->cnrtQueueSync(stream.queue);
  std::lock_guard lock(stream.mutex);
  if (code != cnrtSuccess && stream.sticky_status == H2_STATUS_OK) {
    stream.sticky_status =
        status_of(code) == H2_STATUS_OUT_OF_MEMORY ? H2_STATUS_OUT_OF_MEMORY : H2_STATUS_DEVICE_ERROR;
    stream.sticky = "work on the stream failed: " + cnrt_message(*cnrt_, code, "cnrtQueueSync");
    cnrt_->cnrtGetLastError();
  }
  if (stream.sticky_status != H2_STATUS_OK) fail(stream.sticky_status, stream.sticky);
}

H2_Status Runtime::query(Stream& stream) {
  {
    std::lock_guard lock(stream.mutex);
    if (stream.sticky_status != H2_STATUS_OK) fail(stream.sticky_status, stream.sticky);
  }
  bind(stream.device);
  const cnrtRet_t code = cnrt_->cnrtQueueQuery(stream.queue);
  if (not_ready(code)) {
    cnrt_->cnrtGetLastError();
    return H2_STATUS_NOT_READY;
  }
  synchronize(stream);  // drained (or failed): this collects an error of its work
  return H2_STATUS_OK;
}

H2_Event* Runtime::create_event(int32_t device, uint32_t flags) {
  bind(device);
  auto event = std::make_shared<Event>();
  event->device = device;
  event->timing = (flags & H2_EVENT_DISABLE_TIMING) == 0;
  H2_CNRT(*cnrt_, cnrtNotifierCreateWithFlags, &event->notifier,
          event->timing ? CNRT_NOTIFIER_DEFAULT : CNRT_NOTIFIER_DISABLE_TIMING_SW);
  return events_.add(std::move(event));
}

void Runtime::destroy_event(H2_Event* handle) {
  auto event = events_.take(handle);
  bind(event->device);
  H2_CNRT(*cnrt_, cnrtNotifierDestroy, event->notifier);
}

}  // namespace h2::mlu
