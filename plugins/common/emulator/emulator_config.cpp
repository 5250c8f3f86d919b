#include "emulator_config.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace h2::emulator {
namespace {

struct Reader {
  const VendorCodes& codes;

  [[noreturn]] void malformed(const char* variable, const std::string& value, const std::string& why) const {
    throw Error(codes.invalid_argument, std::string(variable) + "='" + value + "' is not valid: " + why);
  }

  int64_t integer(const char* variable, const std::string& text) const {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      malformed(variable, text, "expected a whole number");
    }
    if (used != text.size() || value < 0) malformed(variable, text, "expected a whole number >= 0");
    return value;
  }

  size_t bytes(const char* variable, const std::string& text) const {
    size_t split = 0;
    while (split < text.size() && std::isdigit(static_cast<unsigned char>(text[split]))) ++split;
    const std::string unit = text.substr(split);
    size_t scale = 1;
    if (unit == "KiB")
      scale = size_t{1} << 10;
    else if (unit == "MiB")
      scale = size_t{1} << 20;
    else if (unit == "GiB")
      scale = size_t{1} << 30;
    else if (!unit.empty())
      malformed(variable, text, "the unit must be KiB, MiB or GiB");
    if (split == 0) malformed(variable, text, "expected a size such as 512MiB");
    return static_cast<size_t>(integer(variable, text.substr(0, split))) * scale;
  }
};

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

}  // namespace

Config read_config(const ConfigVariables& variables, Config config, const VendorCodes& codes) {
  const Reader read{codes};
  if (const char* devices = std::getenv(variables.devices))
    config.physical_devices = static_cast<int>(read.integer(variables.devices, devices));
  if (const char* memory = std::getenv(variables.memory)) config.memory_bytes = read.bytes(variables.memory, memory);
  if (config.memory_bytes < (size_t{1} << 20)) read.malformed(variables.memory, "", "at least 1MiB");
  if (const char* model = std::getenv(variables.model); model && *model) config.model = model;
  if (const char* faults = std::getenv(variables.fail)) {
    for (const std::string& fault : split(faults, ',')) {
      const size_t equals = fault.find('=');
      const std::string key = fault.substr(0, equals);
      const std::string value = equals == std::string::npos ? "" : fault.substr(equals + 1);
      if (key == "kernel" && !value.empty())
        config.failing_kernel = value;
      else if (key == "lost_after")
        config.lost_after_tasks = read.integer(variables.fail, value);
      else if (key == "malloc" && value.empty())
        config.fail_malloc = true;
      else
        read.malformed(variables.fail, faults, "unknown fault '" + fault + "' (kernel=NAME, lost_after=N, malloc)");
    }
  }
  config.visible.clear();
  if (const char* visible = std::getenv(variables.visible)) {
    for (const std::string& id : split(visible, ',')) {
      const int64_t physical = read.integer(variables.visible, id);
      if (physical < config.physical_devices) config.visible.push_back(static_cast<int>(physical));
    }
  } else {
    for (int d = 0; d < config.physical_devices; ++d) config.visible.push_back(d);
  }
  return config;
}

void Faults::before_task(const std::string& name) {
  check_alive();
  const int64_t count = ++tasks_run_;
  if (config_.lost_after_tasks >= 0 && count > config_.lost_after_tasks) {
    lost_ = true;
    check_alive();
  }
  if (!config_.failing_kernel.empty() && name == config_.failing_kernel)
    throw Error(codes_.kernel_fault,
                "kernel exception in " + name + " (injected by " + std::string(variables_.fail) + ")");
}

void Faults::check_alive() const {
  if (lost_)
    throw Error(codes_.device_lost, "the device stopped answering (lost heartbeat; injected by " +
                                        std::string(variables_.fail) + "=lost_after)");
}

}  // namespace h2::emulator
