// What the emulated CANN runtime pretends to be, read from the environment at aclInit (the variables
// and their meaning: plugins/common/emulator/emulator_config.hpp):
//
//   ASCEND_EMULATOR_DEVICES   devices on the "machine" (default 2; 0: the driver finds none)
//   ASCEND_EMULATOR_MEMORY    memory per device (default 2GiB)
//   ASCEND_EMULATOR_SOC       what aclrtGetSocName reports before " (emulated)" (default Ascend910B3)
//   ASCEND_EMULATOR_FAIL      faults to inject: kernel=NAME (e.g. aclnnMm; the task fails with
//                             ACL_ERROR_RT_AICORE_EXCEPTION), lost_after=N (LOST_HEARTBEAT), malloc
//   ASCEND_RT_VISIBLE_DEVICES which physical devices this process sees, as CANN reads it ("1,0")
#pragma once

#include "emulator_config.hpp"

namespace ascend_emulator {

using Config = h2::emulator::Config;

extern const h2::emulator::ConfigVariables kConfigVariables;

// Reads the variables above; throws Error(ACL_ERROR_INVALID_PARAM) naming a malformed one.
Config read_config();

}  // namespace ascend_emulator
