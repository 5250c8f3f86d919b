// What the emulated aclnn libraries share: the descriptor and executor types behind aclnn's opaque
// handles (libnnopbase.so owns them) and the two-phase machinery every emulated operator uses.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ascend/aclnn.h"
#include "emulator.hpp"

struct aclTensor {
  std::vector<int64_t> view;
  std::vector<int64_t> strides;  // elements
  std::vector<int64_t> storage;
  int64_t offset = 0;  // elements
  aclDataType dtype = ACL_DT_UNDEFINED;
  aclFormat format = ACL_FORMAT_ND;
  void* data = nullptr;  // device memory
};

struct aclIntArray {
  std::vector<int64_t> values;
};

struct aclBoolArray {
  std::vector<bool> values;
};

struct aclScalar {
  aclDataType dtype = ACL_DT_UNDEFINED;
  double value = 0;
};

// An operator planned by phase 1: what phase 2 enqueues once. `kernel` gets the workspace's host
// view (or nullptr when it needs none).
struct aclOpExecutor {
  std::string name;
  uint64_t workspace_bytes = 0;
  std::function<void(void* workspace)> kernel;
};

namespace ascend_emulator {

// Phase 1 of operator `op` ("aclnnAdd"): runs `plan`, which checks the arguments (throwing Error with
// ACLNN_ERR_PARAM_*) and returns the kernel; hands out a registered executor and its workspace size.
ASCEND_EMULATOR_EXPORT aclnnStatus plan_operator(const char* op, uint64_t* workspace_size, aclOpExecutor** executor,
                                                 uint64_t workspace_bytes,
                                                 const std::function<std::function<void(void*)>()>& plan) noexcept;
// Phase 2: checks the executor (live, not yet run) and the workspace, enqueues the kernel on
// `stream` and frees the executor.
ASCEND_EMULATOR_EXPORT aclnnStatus run_operator(const char* op, void* workspace, uint64_t workspace_size,
                                                aclOpExecutor* executor, aclrtStream stream) noexcept;

}  // namespace ascend_emulator
