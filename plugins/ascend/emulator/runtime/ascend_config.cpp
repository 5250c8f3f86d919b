#include "ascend_config.hpp"

#include "emulator.hpp"

namespace ascend_emulator {

const h2::emulator::ConfigVariables kConfigVariables = {
    .devices = "ASCEND_EMULATOR_DEVICES",
    .memory = "ASCEND_EMULATOR_MEMORY",
    .model = "ASCEND_EMULATOR_SOC",
    .fail = "ASCEND_EMULATOR_FAIL",
    .visible = "ASCEND_RT_VISIBLE_DEVICES",
};

Config read_config() {
  Config defaults;
  defaults.model = "Ascend910B3";
  return h2::emulator::read_config(kConfigVariables, defaults, acl_codes());
}

}  // namespace ascend_emulator
