// The emulated CANN runtime's own interface, between its libraries: libascendcl.so (the runtime) owns
// devices, memory and streams; libopapi.so (aclnn operators) reads device memory and enqueues
// kernels through these calls. A test double of the vendor runtime, for H2's tests only: nothing
// here is part of AscendCL, and the Ascend plugin never calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "ascend/acl_runtime.h"
#include "emulator_error.hpp"

#define ASCEND_EMULATOR_EXPORT __attribute__((visibility("default")))

namespace ascend_emulator {

// A failure inside the emulator, with the AscendCL code a call returns for it. Each exported C
// function catches it, records the message for aclGetRecentErrMsg and returns the code.
using Error = h2::emulator::Error;

// AscendCL's codes for the failures the emulators' shared parts raise.
const h2::emulator::VendorCodes& acl_codes();

// Runs `body`, turning an Error (or anything else) into its code and the thread's recent message.
ASCEND_EMULATOR_EXPORT aclError guarded(const char* call, const std::function<void()>& body) noexcept;
ASCEND_EMULATOR_EXPORT void set_recent_error(const std::string& message);

// The host-side view of `bytes` bytes of device memory at `device_ptr`, which must lie inside one
// live allocation (throws Error otherwise). Only the emulator's kernels and copies use it: the
// address a caller holds is not readable by host code.
ASCEND_EMULATOR_EXPORT void* device_view(const void* device_ptr, size_t bytes);
// Whether [ptr, ptr + bytes) lies in one live device allocation (of any device).
ASCEND_EMULATOR_EXPORT bool is_device_memory(const void* ptr, size_t bytes);

// Enqueues `kernel` on `stream` (which must belong to the calling thread's current device). It runs
// on the stream's worker thread in order; an Error it throws becomes the stream's sticky error,
// reported by aclrtSynchronizeStream. `name` names it in that message and in fault injection.
ASCEND_EMULATOR_EXPORT void launch(aclrtStream stream, const std::string& name, std::function<void()> kernel);

// The calling thread's current device (aclrtSetDevice), or throws ACL_ERROR_RT_CONTEXT_NULL.
ASCEND_EMULATOR_EXPORT int32_t current_device();

}  // namespace ascend_emulator
