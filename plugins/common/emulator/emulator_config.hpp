// What an emulated vendor runtime pretends to be, read from the environment when it starts, so a
// test chooses the machine it runs on: how many devices, how much memory each has, which model, and
// which failures to inject for the plugin's error paths. Each emulator names its own variables:
//
//   <PREFIX>_DEVICES   devices on the "machine" (0: the driver finds none)
//   <PREFIX>_MEMORY    memory per device: bytes or with KiB/MiB/GiB
//   <PREFIX>_MODEL     the device model it reports (with " (emulated)")
//   <PREFIX>_FAIL      comma-separated faults to inject:
//                        kernel=NAME      every launch of kernel NAME fails when it runs
//                        lost_after=N     after N tasks have run, the device stops answering:
//                                         every later task and call fails
//                        malloc           every device allocation fails
//   <VISIBLE>          which physical devices this process sees ("1,0"), as the vendor reads it
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator_error.hpp"

namespace h2::emulator {

struct ConfigVariables {
  const char* devices;
  const char* memory;
  const char* model;
  const char* fail;
  const char* visible;
};

struct Config {
  int physical_devices = 2;
  size_t memory_bytes = size_t{2} << 30;
  std::string model;
  std::vector<int> visible;  // logical id -> physical id
  std::string failing_kernel;
  int64_t lost_after_tasks = -1;
  bool fail_malloc = false;
};

// `defaults` with the variables that are set applied; throws Error(invalid_argument) naming a
// malformed one.
Config read_config(const ConfigVariables& variables, Config defaults, const VendorCodes& codes);

// The injected faults of a Config, applied as tasks run.
class Faults {
 public:
  Faults(const Config& config, const ConfigVariables& variables, const VendorCodes& codes)
      : config_(config), variables_(variables), codes_(codes) {}
  // Called before every copy or kernel runs: counts it and applies the injected faults.
  void before_task(const std::string& name);
  // Throws Error(device_lost) once the device has been lost.
  void check_alive() const;

 private:
  const Config& config_;
  const ConfigVariables& variables_;
  const VendorCodes& codes_;
  std::atomic<int64_t> tasks_run_{0};
  std::atomic<bool> lost_{false};
};

}  // namespace h2::emulator
