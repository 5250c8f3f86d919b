// The Ascend plugin's operator table (plugin_abi.h section 8).
#pragma once

#include "h2/plugin_abi.h"

namespace h2::ascend {

extern const H2_OpTable kOpTable;

}  // namespace h2::ascend
