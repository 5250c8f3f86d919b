// Human-readable numbers for the command line's tables.
#pragma once

#include <cstdint>
#include <string>

namespace h2::tools {

std::string format_bytes(uint64_t bytes);                                       // "2.00 GiB"
std::string format_rate(double value, const char* unit);                        // "989.4 T" + unit, "unknown" for 0
std::string format_fixed(double value, int decimals, const char* suffix = "");  // "12.50" + suffix
std::string format_duration(double seconds);                                    // "12.3 us", "4.5 ms", "1.234 s"

}  // namespace h2::tools
