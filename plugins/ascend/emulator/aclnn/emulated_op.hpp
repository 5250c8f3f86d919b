// Helpers every file of emulated operators uses to export an operator's two phases.
#pragma once

#include <type_traits>

#include "aclnn_internal.hpp"

#define ASCEND_EMULATOR_C extern "C" ASCEND_EMULATOR_EXPORT
// Phase 2 of operator `op`, and a check that phase 1 has the signature the plugin's header declares.
#define H2_EMULATED_RUN(op)                                                                           \
  ASCEND_EMULATOR_C aclnnStatus op(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, \
                                   aclrtStream stream) {                                              \
    return ascend_emulator::run_operator(#op, workspace, workspace_size, executor, stream);           \
  }                                                                                                   \
  static_assert(std::is_same_v<decltype(&op), aclnnRunFn>);                                           \
  static_assert(std::is_same_v<decltype(&op##GetWorkspaceSize), op##GetWorkspaceSizeFn>, #op " signature");
