// The code the cpu-reference plugin shares with the other plugins of this repository (plugins/common):
// errors at the C ABI boundary, fp16/bf16 conversions and the Philox generator.
#pragma once

#include "float16.hpp"
#include "philox.hpp"
#include "plugin_error.hpp"

namespace h2::cpu_reference {
using namespace h2::plugin;
}  // namespace h2::cpu_reference
