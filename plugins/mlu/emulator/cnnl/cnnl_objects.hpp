// The emulated CNNL's objects behind its opaque handles, and what every operator does first: check
// its handle, descriptors and pointers when it is called (errors are the call's status), then enqueue
// a kernel on the handle's queue that works on copies of the descriptors (a caller may destroy a
// descriptor as soon as the call returns). Kernel failures (an index out of range) fail the queue.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mlu/cnnl.h"
#include "mlu_emulator.hpp"

#define CNNL_EMULATOR_C extern "C" MLU_EMULATOR_EXPORT

struct cnnlContext {
  int32_t device = 0;
  cnrtQueue_t queue = nullptr;  // NULL until cnnlSetQueue
};

struct cnnlTensorStruct {
  bool set = false;
  cnnlDataType_t dtype = CNNL_DTYPE_INVALID;
  cnnlDataType_t onchip = CNNL_DTYPE_INVALID;  // INVALID: the data's own
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};

struct cnnlOpTensorStruct {
  cnnlOpTensorDesc_t op = CNNL_OP_TENSOR_ADD;
  cnnlDataType_t compute = CNNL_DTYPE_FLOAT;
  bool set = false;
};

struct cnnlActivationStruct {
  cnnlActivationMode_t mode = CNNL_ACTIVATION_SIGMOID;
  bool approximate = false;
  bool set = false;
};

struct cnnlReduceStruct {
  std::vector<int> axes;
  cnnlReduceOp_t op = CNNL_REDUCE_ADD;
  cnnlReduceIndices_t indices = CNNL_REDUCE_NO_INDICES;
  cnnlIndicesType_t indices_type = CNNL_32BIT_INDICES;
  float p = 2;
  bool set = false;
};

struct cnnlMatMulStruct {
  bool transpose_a = false, transpose_b = false, use_beta = false, allow_tf32 = false;
  cnnlDataType_t compute = CNNL_DTYPE_FLOAT;
};
struct cnnlMatMulAlgoStruct {
  bool chosen = false;
};
struct cnnlMatMulHeuristicResult {
  bool filled = false;
};

namespace mlu_emulator {

// What a kernel needs of a tensor: a copy of its descriptor and its device address.
struct Operand {
  cnnlDataType_t dtype = CNNL_DTYPE_INVALID;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  const void* data = nullptr;

  int64_t count() const;
  int rank() const { return static_cast<int>(dims.size()); }
};

// Checks a descriptor and its pointer at call time: the descriptor is set, the pointer is not NULL
// and every element it reaches lies in one live device allocation. Throws Error(CNNL_STATUS_BAD_PARAM)
// naming `role`.
Operand operand(const cnnlTensorDescriptor_t desc, const void* data, const char* role);
// The same for an optional tensor: an empty Operand when both are NULL.
Operand optional_operand(const cnnlTensorDescriptor_t desc, const void* data, const char* role);
// Checks a workspace: NULL with size 0, or device memory of `size` bytes.
void check_workspace(const void* workspace, size_t size);

// Runs a CNNL call: checks the handle (live, with a queue of the calling thread's current device:
// a handle used from another device is an error), runs `body`, which enqueues with `enqueue`.
cnnlStatus_t call(const char* name, cnnlHandle_t handle,
                  const std::function<void(const std::function<void(std::function<void()>)>& enqueue)>& body) noexcept;
// Runs a call that needs no handle (descriptors, queries).
cnnlStatus_t call(const char* name, const std::function<void()>& body) noexcept;

[[noreturn]] void bad_param(const std::string& message);
// A size query's output, checked not NULL.
size_t* checked_size(size_t* size);
// A host scalar (alpha, beta, a fill value) of a floating-point call, checked not NULL.
float host_float(const void* scalar, const char* role);
[[noreturn]] void not_supported(const std::string& message);

}  // namespace mlu_emulator
