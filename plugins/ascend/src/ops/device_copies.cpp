#include "device_copies.hpp"

#include <cstdint>

#include "../acl_error.hpp"
#include "aclnn_call.hpp"

namespace h2::ascend {
namespace {

constexpr uintptr_t kCopyAlignment = 64;  // aclrtMemcpyAsync, CANN 8.0.0: both addresses

bool aligned(const void* ptr) {
  return reinterpret_cast<uintptr_t>(ptr) % kCopyAlignment == 0;
}

H2_Tensor bytes_at(void* data, size_t bytes) {
  H2_Tensor t{};
  t.data = data;
  t.dtype = H2_DTYPE_U8;
  t.rank = 1;
  t.shape[0] = static_cast<int64_t>(bytes);
  t.strides[0] = 1;
  return t;
}

// A device-to-device byte copy at any offsets, as an aclnn kernel.
void copy_bytes(Stream& stream, void* dst, const void* src, size_t bytes) {
  copy_tensor(stream, bytes_at(dst, bytes), bytes_at(const_cast<void*>(src), bytes));
}

// Host memory aclrtMemcpyAsync may use directly: page-locked from this plugin and aligned.
bool direct_host(const Runtime& r, const void* host, size_t bytes) {
  return aligned(host) && r.is_host_allocation(host, bytes);
}

void host_to_device(Stream& stream, void* dst, const void* src, size_t bytes) {
  Runtime& r = runtime();
  if (direct_host(r, src, bytes))
    H2_ACL(r.acl(), aclrtMemcpyAsync, dst, bytes, src, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream.stream);
  else
    r.staging().to_device(stream.stream, dst, src, bytes);
}

void device_to_host(Stream& stream, void* dst, const void* src, size_t bytes) {
  Runtime& r = runtime();
  if (direct_host(r, dst, bytes))
    H2_ACL(r.acl(), aclrtMemcpyAsync, dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream.stream);
  else
    r.staging().to_host(stream.stream, dst, src, bytes);
}

}  // namespace

void copy_async(Stream& stream, void* dst, const void* src, size_t bytes, uint32_t kind) {
  Runtime& r = runtime();
  r.bind(stream.device);
  switch (kind) {
    case H2_MEMCPY_HOST_TO_DEVICE: {
      if (aligned(dst)) return host_to_device(stream, dst, src, bytes);
      StreamScratch landing(stream, bytes);  // aligned: allocations are
      host_to_device(stream, landing.data(), src, bytes);
      return copy_bytes(stream, dst, landing.data(), bytes);
    }
    case H2_MEMCPY_DEVICE_TO_HOST: {
      if (aligned(src)) return device_to_host(stream, dst, src, bytes);
      StreamScratch gathered(stream, bytes);
      copy_bytes(stream, gathered.data(), src, bytes);
      return device_to_host(stream, dst, gathered.data(), bytes);
    }
    default:
      if (aligned(dst) && aligned(src))
        H2_ACL(r.acl(), aclrtMemcpyAsync, dst, bytes, src, bytes, ACL_MEMCPY_DEVICE_TO_DEVICE, stream.stream);
      else
        copy_bytes(stream, dst, src, bytes);
  }
}

}  // namespace h2::ascend
