// The CUDA plugin's operator table (plugin_abi.h section 8) and each operator's slot, defined in the
// file of its family.
#pragma once

#include "h2/plugin_abi.h"
#include "op_slots.hpp"

namespace h2::cuda {

extern const H2_OpTable kOpTable;

H2_OPS(H2_PLUGIN_DECLARE_OP)

}  // namespace h2::cuda
