// The emulated MLU machine from the first CNRT call: the emulators' common machine (devices and their
// memory, queues, notifiers, pinned host memory, shared memory, faults) with CNRT's codes and names.
// What it pretends to be comes from the environment (plugins/common/emulator/emulator_config.hpp):
//
//   MLU_EMULATOR_DEVICES   devices on the "machine" (default 2; 0: the driver finds none)
//   MLU_EMULATOR_MEMORY    memory per device (default 2GiB)
//   MLU_EMULATOR_MODEL     the name cnrtGetDeviceProperties reports before " (emulated)"
//                          (default MLU370-X8)
//   MLU_EMULATOR_FAIL      faults to inject: kernel=NAME (e.g. cnnlMatMul_v2; the task fails with
//                          cnrtErrorKernelTrap), lost_after=N (cnrtErrorDevice), malloc
//   MLU_VISIBLE_DEVICES    which physical devices this process sees ("1,0")
#pragma once

#include <memory>

#include "emulated_machine.hpp"
#include "mlu/cnrt.h"

namespace mlu_emulator {

using h2::emulator::DeviceMemory;
using Queue = h2::emulator::TaskQueue;
using Notifier = h2::emulator::Marker;

const h2::emulator::VendorCodes& cnrt_codes();

class Machine : public h2::emulator::EmulatedMachine {
 public:
  Machine();  // reads the environment; throws Error(cnrtErrorArgsInvalid) naming a malformed variable
  ~Machine() override;

  Queue& queue_of(cnrtQueue_t handle) const { return *queue(handle); }
  std::shared_ptr<Queue> shared_queue(cnrtQueue_t handle) const { return queue(handle); }
};

// The machine, made on the first call that needs it (CNRT has no init call); never destroyed, since a
// process may exit while queues still run.
Machine& machine();

}  // namespace mlu_emulator
