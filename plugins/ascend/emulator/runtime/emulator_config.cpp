#include "emulator_config.hpp"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include "emulator.hpp"

namespace ascend_emulator {
namespace {

[[noreturn]] void malformed(const char* variable, const std::string& value, const std::string& why) {
  throw Error(ACL_ERROR_INVALID_PARAM, std::string(variable) + "='" + value + "' is not valid: " + why);
}

int64_t read_integer(const char* variable, const std::string& text) {
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

size_t read_bytes(const char* variable, const std::string& text) {
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
  return static_cast<size_t>(read_integer(variable, text.substr(0, split))) * scale;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, separator);)
    if (!part.empty()) parts.push_back(part);
  return parts;
}

}  // namespace

Config read_config() {
  Config config;
  if (const char* devices = std::getenv("ASCEND_EMULATOR_DEVICES"))
    config.physical_devices = static_cast<int>(read_integer("ASCEND_EMULATOR_DEVICES", devices));
  if (const char* memory = std::getenv("ASCEND_EMULATOR_MEMORY"))
    config.memory_bytes = read_bytes("ASCEND_EMULATOR_MEMORY", memory);
  if (config.memory_bytes < (size_t{1} << 20)) malformed("ASCEND_EMULATOR_MEMORY", "", "at least 1MiB");
  if (const char* soc = std::getenv("ASCEND_EMULATOR_SOC"); soc && *soc) config.soc = soc;
  if (const char* faults = std::getenv("ASCEND_EMULATOR_FAIL")) {
    for (const std::string& fault : split(faults, ',')) {
      const size_t equals = fault.find('=');
      const std::string key = fault.substr(0, equals);
      const std::string value = equals == std::string::npos ? "" : fault.substr(equals + 1);
      if (key == "kernel" && !value.empty())
        config.failing_kernel = value;
      else if (key == "lost_after")
        config.lost_after_tasks = read_integer("ASCEND_EMULATOR_FAIL", value);
      else if (key == "malloc" && value.empty())
        config.fail_malloc = true;
      else
        malformed("ASCEND_EMULATOR_FAIL", faults, "unknown fault '" + fault + "' (kernel=NAME, lost_after=N, malloc)");
    }
  }
  if (const char* visible = std::getenv("ASCEND_RT_VISIBLE_DEVICES")) {
    for (const std::string& id : split(visible, ',')) {
      const int64_t physical = read_integer("ASCEND_RT_VISIBLE_DEVICES", id);
      if (physical < config.physical_devices) config.visible.push_back(static_cast<int>(physical));
    }
  } else {
    for (int d = 0; d < config.physical_devices; ++d) config.visible.push_back(d);
  }
  return config;
}

}  // namespace ascend_emulator
