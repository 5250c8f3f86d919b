// The CUDA plugin's collective section (plugin_abi.h section 9) on NCCL.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::cuda {

// The table where NCCL 2.14 or later loads (nccl_library.hpp), else nullptr: the plugin then
// offers no collective library, and DiComm runs every collective itself.
const H2_CollectiveTable* collective_table();

}  // namespace h2::cuda
