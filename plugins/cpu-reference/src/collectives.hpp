// cpu-reference's collective library (ABI 1.5, plugin_abi.h section 9): shared memory between the
// processes of one node (plugins/common/shm_collectives.hpp), each call run on its stream's worker.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::cpu_reference {

extern const H2_CollectiveTable kCollectiveTable;

}  // namespace h2::cpu_reference
