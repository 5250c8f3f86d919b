#include "format.hpp"

#include <charconv>
#include <cstdio>

#include "h2/heteroauto/cost_model.hpp"

namespace h2::tools {

std::string format_bytes(uint64_t bytes) {
  return heteroauto::format_memory(static_cast<double>(bytes));
}

std::string format_rate(double value, const char* unit) {
  if (value <= 0) return "unknown";
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int prefix = 0;
  while (value >= 1000 && prefix < 6) {
    value /= 1000;
    ++prefix;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s%s", value, prefixes[prefix], unit);
  return text;
}

std::string format_fixed(double value, int decimals, const char* suffix) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f%s", decimals, value, suffix);
  return text;
}

std::string format_duration(double seconds) {
  if (seconds < 1e-4) return format_fixed(seconds * 1e6, 1, " us");
  return seconds < 1 ? format_fixed(seconds * 1e3, 1, " ms") : format_fixed(seconds, 3, " s");
}

std::string format_exact(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string text;
  for (size_t i = 0; i < items.size(); ++i) text += (i ? separator : "") + items[i];
  return text;
}

}  // namespace h2::tools
