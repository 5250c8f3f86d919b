#include "mlu_machine.hpp"

#include <mutex>

#include "mlu_emulator.hpp"

namespace mlu_emulator {
namespace {

const h2::emulator::ConfigVariables kVariables = {
    .devices = "MLU_EMULATOR_DEVICES",
    .memory = "MLU_EMULATOR_MEMORY",
    .model = "MLU_EMULATOR_MODEL",
    .fail = "MLU_EMULATOR_FAIL",
    .visible = "MLU_VISIBLE_DEVICES",
};

const h2::emulator::MachineTraits& cnrt_traits() {
  static const h2::emulator::MachineTraits traits{
      .variables = kVariables,
      .codes = cnrt_codes(),
      .invalid_device_code = cnrtErrorDeviceInvalid,
      .invalid_handle_code = cnrtErrorInvalidResourceHandle,
      .memory_name = "mlu-emulator-dram",
      // cnrtMalloc hands out blocks aligned to 128 bytes (the MLU's DMA granule), sizes rounded to it.
      .rounding = {.granule = 128, .padding = 0, .alignment = 128},
  };
  return traits;
}

h2::emulator::Config read_mlu_config() {
  h2::emulator::Config defaults;
  defaults.model = "MLU370-X8";
  return h2::emulator::read_config(kVariables, defaults, cnrt_codes());
}

}  // namespace

const h2::emulator::VendorCodes& cnrt_codes() {
  static const h2::emulator::VendorCodes codes{
      .invalid_argument = cnrtErrorArgsInvalid,
      .system_failure = cnrtErrorSys,
      .no_permission = cnrtErrorNotSupport,
      .internal = cnrtErrorUnknown,
      .kernel_fault = cnrtErrorKernelTrap,
      .device_lost = cnrtErrorDevice,
      .free_call = "cnrtFree",
  };
  return codes;
}

Machine::Machine() : EmulatedMachine(read_mlu_config(), cnrt_traits()) {}

Machine::~Machine() {
  stop_queues();
}

Machine& machine() {
  static Machine* instance = nullptr;
  static std::once_flag made;
  static std::string failure;
  static int failure_code = 0;
  std::call_once(made, [] {
    try {
      instance = new Machine();
    } catch (const Error& e) {
      failure = e.what();
      failure_code = e.code();
    }
  });
  if (!instance) throw Error(failure_code, failure);
  return *instance;
}

}  // namespace mlu_emulator
