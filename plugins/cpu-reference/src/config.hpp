// The cpu-reference plugin's configuration, read at initialize from its options (ABI 1.4) and
// environment variables (options.hpp: an option overrides its variable):
//   devices    H2_CPU_REFERENCE_DEVICES  number of devices (1..64, default 1, or the length of the
//                                        memory list)
//   memory     H2_CPU_REFERENCE_MEMORY   capacity per device: one size for all ("2GiB") or one per
//                                        device ("1GiB,2GiB,4GiB"); units B, KiB, MiB, GiB, TiB (and
//                                        KB, MB, GB, TB as powers of 1000); default 4GiB
//   strict     H2_CPU_REFERENCE_STRICT   1/true/on: device memory is not readable by host code
//                                        outside plugin calls (default off)
//   blocking   H2_CPU_REFERENCE_BLOCKING 1/true/on: every stream call completes before it returns,
//                                        as with CUDA_LAUNCH_BLOCKING=1 (default off: each stream is
//                                        a worker thread)
//   op_dtypes  H2_CPU_REFERENCE_OP_DTYPES the float dtypes the operators take, a list of f64, f32,
//                                        f16, bf16 (default all four); "f32,f16,bf16" makes it refuse
//                                        f64 as the accelerator plugins do, so that code meant for
//                                        them is tried here
//   threads    H2_CPU_REFERENCE_THREADS  threads each operator may use (1..256, default: the
//                                        machine's cores); results are bit-identical for any value
//   collectives_in_place H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE  the size from which the collective
//                                        library reads and writes the ranks' buffers in place rather
//                                        than copying through its segment (default 64KiB; 0 or off:
//                                        never); every rank of a communicator must be set alike
// Several devices with different capacities let one machine host an uneven cluster.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "options.hpp"

namespace h2::cpu_reference {

struct Config {
  std::vector<uint64_t> memory_bytes;  // one entry per device
  bool strict = false;
  bool blocking = false;
  uint32_t op_dtypes = 0;  // bit per H2_DType; read_config sets it (F64, F32, F16 and BF16 by default)
  int threads = 1;
  uint64_t collectives_in_place = 64 << 10;  // bytes; 0: never
};

// Throws PluginError(H2_STATUS_INVALID_ARGUMENT) with a message naming where the value came from
// (the option's key or the variable) and the value.
Config read_config(const SettingLookup& setting);
// The settings of `options` (keys already checked against option_infos()) over those of `env`.
Config read_config(const std::map<std::string, std::string>& options, const EnvLookup& env);

// "2GiB" -> 2147483648. Throws std::invalid_argument with a reason.
uint64_t parse_size(const std::string& text);

}  // namespace h2::cpu_reference
