// The MLU plugin's collective section (plugin_abi.h section 9) on CNCL.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::mlu {

// The table where CNCL loads (cncl_library.hpp), else nullptr: the plugin then offers no collective
// library, and DiComm runs every collective itself.
const H2_CollectiveTable* collective_table();

}  // namespace h2::mlu
