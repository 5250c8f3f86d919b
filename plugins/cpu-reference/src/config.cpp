#include "config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "common.hpp"

namespace h2::cpu_reference {

namespace {

constexpr uint64_t kDefaultMemory = 4ull << 30;
constexpr int kMaxDevices = 64;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    parts.push_back(trim(s.substr(start, pos - start)));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

// "H2_CPU_REFERENCE_MEMORY='2XB': why" or "option memory='2XB': why".
[[noreturn]] void bad_setting(const Setting& setting, const std::string& why) {
  fail(H2_STATUS_INVALID_ARGUMENT, setting.origin + "='" + setting.value + "': " + why);
}

bool parse_bool(const Setting& setting) {
  std::string v;
  for (char c : setting.value) v += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no" || v.empty()) return false;
  bad_setting(setting, "expected 1/0, true/false, on/off or yes/no");
}

uint32_t parse_op_dtypes(const Setting& setting) {
  static const std::pair<const char*, H2_DType> known[] = {
      {"f64", H2_DTYPE_F64}, {"f32", H2_DTYPE_F32}, {"f16", H2_DTYPE_F16}, {"bf16", H2_DTYPE_BF16}};
  uint32_t mask = 0;
  for (const std::string& part : split(setting.value, ',')) {
    const std::string dtype = trim(part);
    const auto* found =
        std::find_if(std::begin(known), std::end(known), [&](const auto& k) { return dtype == k.first; });
    if (found == std::end(known)) bad_setting(setting, "'" + dtype + "' is not one of f64, f32, f16, bf16");
    mask |= 1u << found->second;
  }
  if (mask == 0) bad_setting(setting, "expected at least one of f64, f32, f16, bf16");
  return mask;
}

int parse_count(const Setting& setting, int max) {
  size_t used = 0;
  int count = 0;
  try {
    count = std::stoi(setting.value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != trim(setting.value).size() || count < 1 || count > max)
    bad_setting(setting, "expected a whole number from 1 to " + std::to_string(max));
  return count;
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  std::string s = trim(text);
  size_t pos = 0;
  while (pos < s.size() && (std::isdigit(static_cast<unsigned char>(s[pos])) || s[pos] == '.')) ++pos;
  if (pos == 0) throw std::invalid_argument("expected a number followed by a unit, e.g. 2GiB");
  const std::string digits = s.substr(0, pos);
  double number = 0;
  size_t used = 0;
  try {
    number = std::stod(digits, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != digits.size()) throw std::invalid_argument("'" + digits + "' is not a number");
  std::string unit = trim(s.substr(pos));
  struct Unit {
    const char* name;
    double scale;
  };
  static const Unit units[] = {{"", 1},         {"B", 1},      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30},
                               {"TiB", 0x1p40}, {"KB", 1e3},   {"MB", 1e6},     {"GB", 1e9},     {"TB", 1e12},
                               {"K", 0x1p10},   {"M", 0x1p20}, {"G", 0x1p30},   {"T", 0x1p40}};
  for (const Unit& u : units) {
    if (unit == u.name) {
      double bytes = std::floor(number * u.scale);
      if (!(bytes >= 1)) throw std::invalid_argument("size must be at least 1 byte");
      if (bytes > 0x1p62) throw std::invalid_argument("size is too large");
      return static_cast<uint64_t>(bytes);
    }
  }
  throw std::invalid_argument("unknown unit '" + unit + "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
}

Config read_config(const SettingLookup& setting) {
  Config config;

  std::vector<uint64_t> sizes;
  const std::optional<Setting> memory = setting("memory");
  if (memory) {
    for (const std::string& part : split(memory->value, ',')) {
      try {
        sizes.push_back(parse_size(part));
      } catch (const std::invalid_argument& e) {
        bad_setting(*memory, "'" + part + "': " + e.what());
      }
    }
  }

  int devices = sizes.size() > 1 ? static_cast<int>(sizes.size()) : 1;
  if (const std::optional<Setting> count = setting("devices")) {
    devices = parse_count(*count, kMaxDevices);
    if (sizes.size() > 1 && sizes.size() != static_cast<size_t>(devices))
      bad_setting(*memory, "lists " + std::to_string(sizes.size()) + " sizes but " + count->origin + " is " +
                               std::to_string(devices));
  }

  if (sizes.empty()) sizes.push_back(kDefaultMemory);
  if (sizes.size() == 1) sizes.assign(static_cast<size_t>(devices), sizes.front());
  config.memory_bytes = sizes;

  if (const std::optional<Setting> strict = setting("strict")) config.strict = parse_bool(*strict);
  if (const std::optional<Setting> blocking = setting("blocking")) config.blocking = parse_bool(*blocking);

  config.op_dtypes = (1u << H2_DTYPE_F64) | (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16);
  if (const std::optional<Setting> dtypes = setting("op_dtypes")) config.op_dtypes = parse_op_dtypes(*dtypes);

  config.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const std::optional<Setting> threads = setting("threads")) config.threads = parse_count(*threads, 256);

  if (const std::optional<Setting> in_place = setting("collectives_in_place")) {
    if (in_place->value == "0" || in_place->value == "off") {
      config.collectives_in_place = 0;
    } else {
      try {
        config.collectives_in_place = parse_size(in_place->value);
      } catch (const std::invalid_argument& e) {
        bad_setting(*in_place, std::string(e.what()) + " (a size such as 64KiB, or 0/off for never)");
      }
    }
  }
  return config;
}

Config read_config(const std::map<std::string, std::string>& options, const EnvLookup& env) {
  return read_config(settings_from(options, env));
}

}  // namespace h2::cpu_reference
