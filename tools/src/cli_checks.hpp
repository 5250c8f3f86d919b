// Checks of command-line values that CLI11's own validators let through.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

namespace h2::tools {

// A finite number in [low, high]. CLI::Range lets "nan" through (every comparison with NaN is false):
// `--clip nan` turned clipping off and `--min-lr nan` failed only after warm-up, with another message.
CLI::Validator finite_range(double low, double high);

// A byte size (byte_size.hpp: "4096", "16M", "16MiB") in [low, high], replaced by its number of bytes
// before the option's integer is read. CLI::AsSizeValue is not used: it wraps "-5M" around to 2^64 - 5
// Mi, reads "0x10" as 16, and answers an unknown unit with its whole unit table.
CLI::Validator byte_size_range(uint64_t low, uint64_t high);

}  // namespace h2::tools
