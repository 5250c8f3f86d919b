// What the emulated CANN runtime pretends to be, read from the environment at aclInit, so a test
// chooses the machine it runs on: how many devices, how much memory each has, which SoC, and which
// failures to inject for the plugin's error paths.
//
//   ASCEND_EMULATOR_DEVICES   devices on the "machine" (default 2; 0: the driver finds none)
//   ASCEND_EMULATOR_MEMORY    memory per device: bytes or with KiB/MiB/GiB (default 2GiB)
//   ASCEND_EMULATOR_SOC       what aclrtGetSocName reports before " (emulated)" (default Ascend910B3)
//   ASCEND_EMULATOR_FAIL      comma-separated faults to inject:
//                               kernel=NAME      every launch of kernel NAME (e.g. aclnnMm) fails
//                                                with ACL_ERROR_RT_AICORE_EXCEPTION when it runs
//                               lost_after=N     after N tasks have run, the device stops answering:
//                                                every later task and call fails (LOST_HEARTBEAT)
//                               malloc           every aclrtMalloc fails (MEMORY_ALLOCATION)
//   ASCEND_RT_VISIBLE_DEVICES which physical devices this process sees, as CANN reads it ("1,0")
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ascend_emulator {

struct Config {
  int physical_devices = 2;
  size_t memory_bytes = size_t{2} << 30;
  std::string soc = "Ascend910B3";
  std::vector<int> visible;  // logical id -> physical id
  std::string failing_kernel;
  int64_t lost_after_tasks = -1;
  bool fail_malloc = false;
};

// Reads the variables above; throws Error(ACL_ERROR_INVALID_PARAM) naming a malformed one.
Config read_config();

}  // namespace ascend_emulator
