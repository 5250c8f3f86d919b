#include "cli_checks.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "byte_size.hpp"
#include "format.hpp"

namespace h2::tools {

CLI::Validator finite_range(double low, double high) {
  const std::string range = "[" + format_exact(low) + ", " + format_exact(high) + "]";
  return CLI::Validator(
      [low, high, range](std::string& text) -> std::string {
        double value = 0;
        size_t used = 0;
        try {
          value = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != text.size()) return "'" + text + "' is not a number";
        if (!std::isfinite(value)) return "'" + text + "' is not a finite number";
        if (value < low || value > high) return "'" + text + "' is not in " + range;
        return "";
      },
      "NUMBER in " + range);
}

CLI::Validator byte_size_range(uint64_t low, uint64_t high) {
  const std::string range = "[" + byte_size_text(low) + ", " + byte_size_text(high) + "]";
  CLI::Validator validator(
      [low, high, range](std::string& text) -> std::string {
        uint64_t bytes = 0;
        try {
          bytes = parse_byte_size(text);
        } catch (const std::invalid_argument& e) {
          return e.what();
        }
        if (bytes < low || bytes > high)
          return "'" + text + "' (" + std::to_string(bytes) + " bytes) is not in " + range;
        text = std::to_string(bytes);
        return "";
      },
      "SIZE in " + range);
  return validator;
}

}  // namespace h2::tools
