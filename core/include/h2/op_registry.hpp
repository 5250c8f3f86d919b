// The ABI's operators by name, from the one list of them (H2_OPS in h2/plugin_ops.h), for messages,
// reports and tools: nothing in the core or its users keeps a list of operators of its own.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "h2/plugin_abi.h"

namespace h2 {

// Every operator of the ABI this core speaks, in id order.
std::span<const H2_Op> all_ops();
// "gemm" for H2_OP_GEMM; "operator 99" is not returned: an id outside the ABI gives "".
std::string_view op_name(H2_Op op);
// H2_OP_GEMM for "gemm", nullopt for a name that is not an operator.
std::optional<H2_Op> op_by_name(std::string_view name);
// The ABI minor that added `op` (1 for the operators of 1.1).
int op_minor(H2_Op op);

}  // namespace h2
