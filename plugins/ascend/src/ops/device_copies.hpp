// memcpy_async under CANN 8.0's rules: aclrtMemcpyAsync needs both addresses 64-byte aligned and host
// memory page-locked. The ABI's copies take any offsets (a slice of a tensor, a chunk of a message) and
// any host memory, so an unaligned device side goes through aligned scratch memory of the stream and a
// byte copy by aclnnInplaceCopy (UINT8 views describe any offset), and host memory that is pageable or
// unaligned through page-locked staging (host_staging.hpp). Every path is ordered on the stream and
// never waits for the device.
#pragma once

#include <cstddef>

#include "../runtime.hpp"

namespace h2::ascend {

// The ABI's memcpy_async (arguments already checked): `kind` an H2_MemcpyKind value.
void copy_async(Stream& stream, void* dst, const void* src, size_t bytes, uint32_t kind);

}  // namespace h2::ascend
