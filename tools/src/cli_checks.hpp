// Checks of command-line values that CLI11's own validators let through.
#pragma once

#include <CLI/CLI.hpp>

namespace h2::tools {

// A finite number in [low, high]. CLI::Range lets "nan" through (every comparison with NaN is false):
// `--clip nan` turned clipping off and `--min-lr nan` failed only after warm-up, with another message.
CLI::Validator finite_range(double low, double high);

}  // namespace h2::tools
