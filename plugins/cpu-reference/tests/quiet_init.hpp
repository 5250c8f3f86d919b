// What the cpu-reference tests that call the C table directly pass to initialize: this core's ABI
// version and a logger that drops everything.
#pragma once

#include "h2/plugin_abi.h"

namespace h2::cpu_reference::test {

inline void ignore_log(void*, H2_LogLevel, const char*) {}

inline H2_InitArgs quiet_init_args() {
  H2_InitArgs args{};
  args.struct_size = sizeof args;
  args.core_abi_major = H2_ABI_MAJOR;
  args.core_abi_minor = H2_ABI_MINOR;
  args.log = ignore_log;
  args.log_level = H2_LOG_ERROR;
  return args;
}

}  // namespace h2::cpu_reference::test
