// The MLU plugin's operator table (plugin_abi.h section 8) and the operators it provides, each defined
// in the file of its family.
#pragma once

#include "h2/plugin_abi.h"
#include "op_slots.hpp"

namespace h2::mlu {

extern const H2_OpTable kOpTable;

H2_OPS(H2_PLUGIN_DECLARE_OP)

}  // namespace h2::mlu
