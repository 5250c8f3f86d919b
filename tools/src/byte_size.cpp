#include "byte_size.hpp"

#include <cctype>
#include <limits>
#include <stdexcept>

namespace h2::tools {

namespace {

struct Unit {
  const char* short_name;  // "k"
  const char* long_name;   // "kib"
  int shift;
};
constexpr Unit kUnits[] = {{"b", "b", 0}, {"k", "kib", 10}, {"m", "mib", 20}, {"g", "gib", 30}, {"t", "tib", 40}};

std::string lower(std::string_view text) {
  std::string out;
  for (char c : text) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const char* const kUnitsHelp = "units: K, M, G, T or KiB, MiB, GiB, TiB, each 1024 times the one before";

}  // namespace

uint64_t parse_byte_size(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  if (text.empty()) throw std::invalid_argument("an empty value is not a byte size");
  if (text.front() == '-') throw std::invalid_argument(quoted + " is negative: a byte size is 0 or more");
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  if (digits == 0)
    throw std::invalid_argument(quoted +
                                " is not a byte size: expected a whole number with an optional unit, e.g. "
                                "4096, 16M or 16MiB");
  const std::string unit = lower(text.substr(digits));
  const Unit* found = nullptr;
  for (const Unit& u : kUnits)
    if (unit.empty() || unit == u.short_name || unit == u.long_name) {
      found = &u;
      break;
    }
  if (found == nullptr) {
    if (unit == "kb" || unit == "mb" || unit == "gb" || unit == "tb")
      throw std::invalid_argument(quoted + ": write " + std::string(text.substr(0, digits + 1)) + " or " +
                                  std::string(text.substr(0, digits + 1)) + "iB (1024-based); " +
                                  std::string(text.substr(digits)) + " would be ambiguous");
    if (unit.front() == '.' || unit.front() == 'e')
      throw std::invalid_argument(quoted + " is not a whole number of bytes (write 1536K, not 1.5M)");
    throw std::invalid_argument(quoted + " has an unknown unit '" + std::string(text.substr(digits)) + "' (" +
                                kUnitsHelp + ")");
  }
  uint64_t number = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (size_t i = 0; i < digits; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (number > (kMax - digit) / 10) throw std::invalid_argument(quoted + " is too large (more than 2^64 - 1 bytes)");
    number = number * 10 + digit;
  }
  if (number > (kMax >> found->shift)) throw std::invalid_argument(quoted + " is too large (more than 2^64 - 1 bytes)");
  return number << found->shift;
}

std::string byte_size_text(uint64_t bytes) {
  static const char* const kNames[] = {"TiB", "GiB", "MiB", "KiB"};
  static const int kShifts[] = {40, 30, 20, 10};
  for (size_t i = 0; i < 4; ++i)
    if (bytes != 0 && bytes % (uint64_t{1} << kShifts[i]) == 0) return std::to_string(bytes >> kShifts[i]) + kNames[i];
  return std::to_string(bytes);
}

}  // namespace h2::tools
