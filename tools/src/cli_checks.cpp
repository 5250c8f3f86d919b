#include "cli_checks.hpp"

#include <cmath>
#include <string>

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

}  // namespace h2::tools
