// Human-readable numbers for the command line's tables.
#pragma once

#include <cstdint>
#include <string>

namespace h2::tools {

std::string format_bytes(uint64_t bytes);                 // "2.00 GiB"
std::string format_rate(double value, const char* unit);  // "989.4 T" + unit, "unknown" for 0

}  // namespace h2::tools
