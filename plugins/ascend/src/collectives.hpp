// The Ascend plugin's collective section (plugin_abi.h section 9) on HCCL.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::ascend {

// The table where HCCL loads (hccl_library.hpp), else nullptr: the plugin then offers no collective
// library, and DiComm runs every collective itself.
const H2_CollectiveTable* collective_table();

}  // namespace h2::ascend
