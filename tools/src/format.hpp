// Human-readable numbers for the command line's tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace h2::tools {

std::string format_bytes(uint64_t bytes);                                       // "2.00 GiB"
std::string format_rate(double value, const char* unit);                        // "989.4 T" + unit, "unknown" for 0
std::string format_fixed(double value, int decimals, const char* suffix = "");  // "12.50" + suffix
std::string format_duration(double seconds);                                    // "12.3 us", "4.5 ms", "1.234 s"
// The shortest text that reads back as exactly `value` ("1e-07", "0.003"): for passing a number on
// to another process's command line, where std::to_string's six decimals would lose it.
std::string format_exact(double value);
// The items with `separator` between them: join({"a", "b"}, ", ") is "a, b".
std::string join(const std::vector<std::string>& items, const char* separator);

}  // namespace h2::tools
