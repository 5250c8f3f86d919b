#include "dmabuf_export.hpp"

#include <cuda.h>
#include <unistd.h>

#include <string>

#include "cuda_error.hpp"
#include "runtime.hpp"

namespace h2::cuda {

namespace {

// The driver calls this file needs, found once. Any of them missing leaves `found` false.
struct DriverCalls {
  CUresult (*device_attribute)(int*, CUdevice_attribute, CUdevice) = nullptr;
  CUresult (*address_range)(CUdeviceptr*, size_t*, CUdeviceptr) = nullptr;
  CUresult (*handle_for_range)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) = nullptr;
  CUresult (*error_string)(CUresult, const char**) = nullptr;
  bool found = false;
  std::string missing;  // which one, when not found
};

template <typename Fn>
bool look_up(const char* symbol, Fn& fn, std::string& missing) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult result{};
  // The ABI of each symbol as CUDA 12.0 defined it (cuMemGetAddressRange is then its _v2). Runtimes
  // before 12.5 have only the unversioned lookup, which gives the toolkit's own version of it.
#if CUDART_VERSION >= 12050
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &result);
#else
  const cudaError_t status = cudaGetDriverEntryPoint(symbol, &address, cudaEnableDefault, &result);
#endif
  if (status != cudaSuccess || result != cudaDriverEntryPointSuccess || address == nullptr) {
    cudaGetLastError();
    if (missing.empty()) missing = symbol;
    return false;
  }
  fn = reinterpret_cast<Fn>(address);
  return true;
}

const DriverCalls& driver() {
  static const DriverCalls calls = [] {
    DriverCalls c;
    c.found = look_up("cuDeviceGetAttribute", c.device_attribute, c.missing) &
              look_up("cuMemGetAddressRange", c.address_range, c.missing) &
              look_up("cuMemGetHandleForAddressRange", c.handle_for_range, c.missing) &
              look_up("cuGetErrorString", c.error_string, c.missing);
    return c;
  }();
  return calls;
}

std::string describe(CUresult result) {
  const char* text = nullptr;
  if (driver().error_string == nullptr || driver().error_string(result, &text) != CUDA_SUCCESS || text == nullptr)
    return "CUresult " + std::to_string(static_cast<int>(result));
  return text;
}

}  // namespace

bool dmabuf_supported(int device) {
  const DriverCalls& d = driver();
  int supported = 0;
  return d.found && d.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) == CUDA_SUCCESS &&
         supported != 0;
}

int export_dmabuf(int device, const void* ptr, size_t bytes, uint64_t& offset_within) {
  if (bytes == 0) fail(H2_STATUS_INVALID_ARGUMENT, "cannot export 0 bytes as a dma-buf");
  runtime().check_memory_of(device, ptr);
  const DriverCalls& d = driver();
  const CUdeviceptr address = reinterpret_cast<CUdeviceptr>(ptr);
  // The range first: a caller's wrong range is INVALID_ARGUMENT on every GPU, also one that could not
  // export it anyway.
  if (d.address_range != nullptr) {
    CUdeviceptr base = 0;
    size_t size = 0;
    if (const CUresult r = d.address_range(&base, &size, address); r != CUDA_SUCCESS)
      fail(H2_STATUS_INVALID_ARGUMENT, "pointer is not inside an allocation: cuMemGetAddressRange: " + describe(r));
    if (bytes > base + size - address)
      fail(H2_STATUS_INVALID_ARGUMENT, "the range runs " + std::to_string(bytes - (base + size - address)) +
                                           " bytes past the end of its allocation");
  }
  if (!d.found)
    fail(H2_STATUS_UNSUPPORTED,
         "the NVIDIA driver has no " + d.missing + " (dma-buf export needs a CUDA 12 driver or later)");
  if (!dmabuf_supported(device))
    fail(H2_STATUS_UNSUPPORTED, "device " + std::to_string(device) +
                                    " cannot export dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: the "
                                    "driver, the kernel or the GPU lacks it)");
  // The driver takes whole host pages. The pool may have put other allocations in the pages at the
  // range's ends (the ABI lets the dma-buf cover the pages that hold the range); a driver that
  // refuses a range reaching past the allocation says so, and the export is unsupported.
  const CUdeviceptr page = static_cast<CUdeviceptr>(sysconf(_SC_PAGESIZE));
  const CUdeviceptr first = address / page * page;
  const CUdeviceptr end = (address + bytes + page - 1) / page * page;
  int fd = -1;
  if (const CUresult r = d.handle_for_range(&fd, first, end - first, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
      r != CUDA_SUCCESS)
    fail(H2_STATUS_UNSUPPORTED,
         "cuMemGetHandleForAddressRange of " + std::to_string(end - first) + " bytes: " + describe(r));
  offset_within = address - first;
  return fd;
}

}  // namespace h2::cuda
