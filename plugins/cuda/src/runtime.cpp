#include "runtime.hpp"

#include <cstdio>
#include <cstring>

#include "cuda_error.hpp"
#include "dmabuf_export.hpp"
#include "op_slots.hpp"

namespace h2::cuda {

namespace {

constexpr size_t kBlasWorkspace = size_t{32} << 20;

void copy_string(char* dst, size_t capacity, const std::string& src) {
  std::snprintf(dst, capacity, "%s", src.c_str());
}

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  H2_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

// Dense FLOPs per clock per SM: (fp32 FMA units, fp16/bf16 tensor-core rate with fp32 accumulation).
// From NVIDIA's architecture whitepapers; the planner refines them with `h2 profile`.
struct Rates {
  double fp32, tensor16;
};
Rates rates_for(int major, int minor) {
  if (major == 8 && minor == 0) return {128, 2048};           // A100
  if (major == 8) return {256, 1024};                         // A10, A40, L4, L40 (sm_86, sm_89)
  if (major == 9) return {256, 4096};                         // H100, H200
  if (major >= 10) return {256, 8192};                        // Blackwell
  if (major == 7) return {128, minor == 0 ? 1024.0 : 512.0};  // V100, T4
  return {128, 0};
}

// The operator a kernel's data-dependent error (an index out of range) came from; cross-entropy's is
// in its targets.
std::string operator_name(int op) {
  const char* name = h2::plugin::op_name(static_cast<uint32_t>(op));
  if (name == nullptr) return "operator " + std::to_string(op);
  const bool target = op == H2_OP_CROSS_ENTROPY || op == H2_OP_CROSS_ENTROPY_BACKWARD;
  return std::string(name) + (target ? " (target)" : "");
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

void use_device(int device) {
  H2_CUDA_CHECK(cudaSetDevice(device));
}

Runtime::Runtime(const H2_InitArgs& args)
    : log_fn_(args.log), log_user_data_(args.log_user_data), log_level_(args.log_level) {
  int driver = 0;
  const cudaError_t driver_status = cudaDriverGetVersion(&driver);
  if (driver_status != cudaSuccess || driver == 0)
    fail(H2_STATUS_RUNTIME_MISSING, "no NVIDIA driver (libcuda.so.1) was found on this machine");
  const cudaError_t count_status = cudaGetDeviceCount(&device_count_);
  if (count_status == cudaErrorNoDevice || (count_status == cudaSuccess && device_count_ == 0))
    fail(H2_STATUS_NO_DEVICE, "no CUDA device: the NVIDIA driver " + std::to_string(driver / 1000) + "." +
                                  std::to_string(driver % 1000 / 10) + " sees no GPU");
  H2_CUDA_CHECK(count_status);

  for (int d = 0; d < device_count_; ++d) {
    use_device(d);
    if (!attribute(cudaDevAttrMemoryPoolsSupported, d))
      fail(H2_STATUS_DEVICE_ERROR, "device " + std::to_string(d) + " does not support memory pools (cudaMallocAsync)");
    cudaMemPool_t pool;
    H2_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, d));
    // Keep freed memory in the pool: allocation in a training step then costs no driver call.
    uint64_t keep = UINT64_MAX;
    H2_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    pools_.push_back(pool);
    cudaStream_t s;
    H2_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    allocation_streams_.push_back(s);
  }
  log(H2_LOG_INFO, std::to_string(device_count_) + " CUDA device(s), driver " + std::to_string(driver));
}

Runtime::~Runtime() {
  for (const auto& stream : streams_.snapshot()) {
    cudaSetDevice(stream->device);
    cudaStreamSynchronize(stream->stream);
  }
  streams_.clear();
  events_.clear();
  for (size_t d = 0; d < allocation_streams_.size(); ++d) {
    cudaSetDevice(static_cast<int>(d));
    cudaStreamDestroy(allocation_streams_[d]);
  }
}

void Runtime::log(H2_LogLevel level, const std::string& message) const {
  if (log_fn_ != nullptr && static_cast<uint32_t>(level) <= log_level_) log_fn_(log_user_data_, level, message.c_str());
}

void Runtime::check_device(int device) const {
  if (device < 0 || device >= device_count_)
    fail(H2_STATUS_INVALID_ARGUMENT,
         "device " + std::to_string(device) + " does not exist (the plugin has " + std::to_string(device_count_) + ")");
}

void Runtime::properties(int device, H2_DeviceProperties& props) const {
  check_device(device);
  if (props.struct_size < H2_DEVICE_PROPERTIES_SIZE_1_0)
    fail(H2_STATUS_INVALID_ARGUMENT, "props->struct_size is smaller than ABI 1.0's");
  cudaDeviceProp p;
  H2_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  copy_string(props.name, sizeof props.name, p.name);
  copy_string(props.vendor, sizeof props.vendor, "NVIDIA");
  char bus[32];
  std::snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", p.pciDomainID, p.pciBusID, p.pciDeviceID);
  copy_string(props.bus_id, sizeof props.bus_id, bus);
  props.kind = H2_DEVICE_KIND_GPU;
  props.compute_units = static_cast<uint32_t>(p.multiProcessorCount);
  props.total_memory_bytes = p.totalGlobalMem;
  const double clock_hz = attribute(cudaDevAttrClockRate, device) * 1e3;
  const double memory_clock_hz = attribute(cudaDevAttrMemoryClockRate, device) * 1e3;
  const int bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  props.memory_bandwidth_bytes_per_s = 2.0 * memory_clock_hz * bus_bits / 8;  // double data rate
  const Rates rates = rates_for(p.major, p.minor);
  const double sms = p.multiProcessorCount;
  for (double& f : props.peak_flops) f = 0;
  props.peak_flops[H2_DTYPE_F32] = sms * clock_hz * rates.fp32;
  props.peak_flops[H2_DTYPE_F16] = sms * clock_hz * rates.tensor16;
  props.peak_flops[H2_DTYPE_BF16] = p.major >= 8 ? sms * clock_hz * rates.tensor16 : 0;
  props.supported_dtypes = (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_I32) | (1u << H2_DTYPE_I64) |
                           (p.major >= 8 ? (1u << H2_DTYPE_BF16) : 0u);
  // Device pointers can be registered as CUDA memory (FI_HMEM_CUDA), and exported as dma-bufs
  // (mem_export_dmabuf) where the driver and the kernel can.
  props.nic_direct_memory = H2_NIC_DIRECT_HOST | H2_NIC_DIRECT_CUDA;
  if (dmabuf_supported(device)) props.nic_direct_memory |= H2_NIC_DIRECT_DMABUF;
  props.host_accessible = 0;
}

void Runtime::memory_info(int device, uint64_t& free_bytes, uint64_t& total_bytes) const {
  check_device(device);
  use_device(device);
  size_t f = 0, t = 0;
  H2_CUDA_CHECK(cudaMemGetInfo(&f, &t));
  // Memory held in the pool for reuse is free to this plugin's allocations.
  uint64_t reserved = 0, used = 0;
  H2_CUDA_CHECK(
      cudaMemPoolGetAttribute(pools_[static_cast<size_t>(device)], cudaMemPoolAttrReservedMemCurrent, &reserved));
  H2_CUDA_CHECK(cudaMemPoolGetAttribute(pools_[static_cast<size_t>(device)], cudaMemPoolAttrUsedMemCurrent, &used));
  free_bytes = f + (reserved - used);
  total_bytes = t;
}

void* Runtime::allocate(int device, size_t bytes) {
  check_device(device);
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
  use_device(device);
  void* ptr = nullptr;
  cudaStream_t s = allocation_streams_[static_cast<size_t>(device)];
  const cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pools_[static_cast<size_t>(device)], s);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    out_of_memory(device, bytes);
  }
  H2_CUDA_CHECK(status);
  H2_CUDA_CHECK(cudaStreamSynchronize(s));  // the memory is usable on any stream from here on
  return ptr;
}

void Runtime::check_memory_of(int device, const void* ptr) const {
  check_device(device);
  use_device(device);
  cudaPointerAttributes attributes;
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess || attributes.type != cudaMemoryTypeDevice ||
      attributes.device != device) {
    cudaGetLastError();
    fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not device memory of device " + std::to_string(device));
  }
}

void Runtime::release(int device, void* ptr) {
  check_memory_of(device, ptr);
  // The ABI's mem_free waits for the work already queued that may use the memory: order the free
  // after what every stream of the device has queued so far (events, not cudaDeviceSynchronize,
  // which would also wait for work other threads enqueue meanwhile), then wait for the free.
  cudaStream_t s = allocation_streams_[static_cast<size_t>(device)];
  for (const std::shared_ptr<Stream>& other : streams_.snapshot()) {
    if (other->device != device) continue;
    cudaEvent_t queued;
    H2_CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(queued, other->stream);
    const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(s, queued, 0) : recorded;
    cudaEventDestroy(queued);  // legal while the wait is pending: the wait holds what it captured
    H2_CUDA_CHECK(waited);
  }
  H2_CUDA_CHECK(cudaFreeAsync(ptr, s));
  H2_CUDA_CHECK(cudaStreamSynchronize(s));
}

void* Runtime::allocate_async(int device, size_t bytes, Stream& stream) {
  check_device(device);
  if (stream.device != device)
    fail(H2_STATUS_INVALID_ARGUMENT,
         "the stream belongs to device " + std::to_string(stream.device) + ", not " + std::to_string(device));
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot allocate 0 bytes");
  use_device(device);
  void* ptr = nullptr;
  const cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pools_[static_cast<size_t>(device)], stream.stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    out_of_memory(device, bytes);
  }
  H2_CUDA_CHECK(status);
  return ptr;
}

void Runtime::release_async(int device, void* ptr, Stream& stream) {
  check_device(device);
  if (stream.device != device)
    fail(H2_STATUS_INVALID_ARGUMENT,
         "the stream belongs to device " + std::to_string(stream.device) + ", not " + std::to_string(device));
  use_device(device);
  H2_CUDA_CHECK(cudaFreeAsync(ptr, stream.stream));
}

void Runtime::out_of_memory(int device, size_t bytes) {
  uint64_t free_bytes = 0, total = 0;
  memory_info(device, free_bytes, total);
  fail(H2_STATUS_OUT_OF_MEMORY, "device " + std::to_string(device) + " out of memory: requested " +
                                    std::to_string(bytes) + " bytes, " + std::to_string(free_bytes) + " free of " +
                                    std::to_string(total));
}

H2_Stream* Runtime::create_stream(int device) {
  check_device(device);
  use_device(device);
  auto stream = std::make_shared<Stream>();
  stream->device = device;
  H2_CUDA_CHECK(cudaStreamCreateWithFlags(&stream->stream, cudaStreamNonBlocking));
  H2_CUDA_CHECK(cudaMalloc(&stream->error, sizeof(DeviceError)));
  H2_CUDA_CHECK(cudaMemsetAsync(stream->error, 0, sizeof(DeviceError), stream->stream));
  H2_CUDA_CHECK(cudaMalloc(&stream->blas_workspace, kBlasWorkspace));
  check(cublasCreate(&stream->blas), "cublasCreate");
  check(cublasSetStream(stream->blas, stream->stream), "cublasSetStream");
  check(cublasSetWorkspace(stream->blas, stream->blas_workspace, kBlasWorkspace), "cublasSetWorkspace");
  // fp32 GEMMs in fp32 (the default math mode never uses TF32 for CUBLAS_COMPUTE_32F), fp16/bf16
  // on tensor cores, and never a reduced-precision (fp16) split-K reduction: the contract is fp32
  // accumulation.
  check(cublasSetMathMode(stream->blas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                                  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
        "cublasSetMathMode");
  return streams_.add(std::move(stream));
}

std::shared_ptr<Stream> Runtime::stream(H2_Stream* handle) const {
  return streams_.get(handle);
}

void Runtime::destroy_stream(H2_Stream* handle) {
  std::shared_ptr<Stream> s = streams_.take(handle);
  use_device(s->device);
  H2_CUDA_CHECK(cudaStreamSynchronize(s->stream));
  cublasDestroy(s->blas);
  cudaFree(s->blas_workspace);
  cudaFree(s->error);
  H2_CUDA_CHECK(cudaStreamDestroy(s->stream));
}

void Runtime::read_device_error(Stream& s) {
  if (!s.sticky().empty()) return;
  DeviceError e{};
  H2_CUDA_CHECK(cudaMemcpyAsync(&e, s.error, sizeof e, cudaMemcpyDeviceToHost, s.stream));
  H2_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (e.code == 0) return;
  const std::string op = operator_name(e.code);
  s.set_sticky(op + ": index " + std::to_string(e.value) + " is outside [0, " + std::to_string(e.limit) + ")");
}

void Runtime::synchronize(Stream& s) {
  use_device(s.device);
  H2_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  read_device_error(s);
  if (const std::string sticky = s.sticky(); !sticky.empty())
    fail(H2_STATUS_INVALID_ARGUMENT, "earlier asynchronous work on the stream failed: " + sticky);
}

H2_Status Runtime::query(Stream& s) {
  use_device(s.device);
  const cudaError_t status = cudaStreamQuery(s.stream);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return H2_STATUS_NOT_READY;
  }
  H2_CUDA_CHECK(status);
  read_device_error(s);
  if (const std::string sticky = s.sticky(); !sticky.empty())
    fail(H2_STATUS_INVALID_ARGUMENT, "earlier asynchronous work on the stream failed: " + sticky);
  return H2_STATUS_OK;
}

H2_Event* Runtime::create_event(int device, uint32_t flags) {
  check_device(device);
  if ((flags & ~static_cast<uint32_t>(H2_EVENT_DISABLE_TIMING)) != 0)
    fail(H2_STATUS_INVALID_ARGUMENT, "unknown event flags " + std::to_string(flags));
  use_device(device);
  auto event = std::make_shared<Event>();
  event->device = device;
  event->timing = (flags & H2_EVENT_DISABLE_TIMING) == 0;
  H2_CUDA_CHECK(cudaEventCreateWithFlags(&event->event, event->timing ? cudaEventDefault : cudaEventDisableTiming));
  return events_.add(std::move(event));
}

std::shared_ptr<Event> Runtime::event(H2_Event* handle) const {
  return events_.get(handle);
}

void Runtime::destroy_event(H2_Event* handle) {
  std::shared_ptr<Event> e = events_.take(handle);
  use_device(e->device);
  H2_CUDA_CHECK(cudaEventDestroy(e->event));  // CUDA keeps it alive for waits already enqueued
}

}  // namespace h2::cuda
