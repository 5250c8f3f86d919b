// The emulated Neuware runtime's own interface, between its libraries: libcnrt.so (the runtime) owns
// devices, memory, queues and notifiers; libcnnl.so (operators) reads device memory and enqueues
// kernels through these calls. A test double of the vendor runtime, for H2's tests only: nothing
// here is part of CNRT, and the MLU plugin never calls it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "emulator_error.hpp"
#include "mlu/cnrt.h"

#define MLU_EMULATOR_EXPORT __attribute__((visibility("default")))

namespace mlu_emulator {

// A failure inside the emulator, with the cnrtRet_t (or, in libcnnl, cnnlStatus_t) a call returns.
using Error = h2::emulator::Error;

// The host-side view of `bytes` bytes of device memory at `device_ptr`, which must lie inside one
// live allocation (throws Error otherwise). Only the emulator's kernels and copies use it: the
// address a caller holds is not readable by host code.
MLU_EMULATOR_EXPORT void* device_view(const void* device_ptr, size_t bytes);
// Whether [ptr, ptr + bytes) lies in one live device allocation (of any device).
MLU_EMULATOR_EXPORT bool is_device_memory(const void* ptr, size_t bytes);

// The device `queue` belongs to (throws Error for a queue that is not live).
MLU_EMULATOR_EXPORT int32_t queue_device(cnrtQueue_t queue);
// Enqueues `kernel` on `queue`, which must belong to the calling thread's current device. It runs on
// the queue's worker thread in order; an Error it throws becomes the queue's sticky error, reported
// by cnrtQueueSync. `name` names it in that message and in fault injection.
MLU_EMULATOR_EXPORT void launch(cnrtQueue_t queue, const std::string& name, std::function<void()> kernel);

// The calling thread's current device (cnrtSetDevice; device 0 until then, as CNRT does).
MLU_EMULATOR_EXPORT int32_t current_device();

}  // namespace mlu_emulator
