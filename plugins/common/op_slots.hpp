// The operator slots, from the ABI's one list of operators (H2_OPS in h2/plugin_ops.h), so every
// plugin of this repository declares its `op_<name>` functions and fills its table from it:
//   H2_OPS(H2_PLUGIN_DECLARE_OP)                   declares H2_Status op_gemm(H2_Stream*, const H2_GemmArgs*); ...
//   { ..., H2_OPS(H2_PLUGIN_OP_TABLE_ENTRY) }      fills .gemm = op_gemm, ... in an H2_OpTable
#pragma once

#include <string>

#include "h2/plugin_abi.h"
#include "plugin_error.hpp"

#define H2_PLUGIN_DECLARE_OP(name, NAME, id, Args, minor) H2_Status op_##name(H2_Stream* stream, const Args* args);
#define H2_PLUGIN_OP_TABLE_ENTRY(name, NAME, id, Args, minor) .name = op_##name,

namespace h2::plugin {

// The checks every plugin's `capability` slot makes on its arguments before answering.
inline void check_capability_query(uint32_t op, const H2_OpCapability* capability) {
  require(capability, "capability");
  if (op < 1 || op > H2_OP_COUNT) fail(H2_STATUS_UNSUPPORTED, "unknown operator " + std::to_string(op));
  if (capability->struct_size < H2_OP_CAPABILITY_SIZE_1_1)
    fail(H2_STATUS_INVALID_ARGUMENT, "capability->struct_size is smaller than ABI 1.1's");
}

// The operator's name ("gemm") from its id, or nullptr for an id outside the ABI.
inline const char* op_name(uint32_t op) {
#define H2_PLUGIN_OP_NAME(name, NAME, id, Args, minor) #name,
  static const char* const names[] = {H2_OPS(H2_PLUGIN_OP_NAME)};
#undef H2_PLUGIN_OP_NAME
  return op >= 1 && op <= H2_OP_COUNT ? names[op - 1] : nullptr;
}

}  // namespace h2::plugin
