// `h2 conform`: certifies a plugin against the cpu-reference plugin with the conformance suite,
// and `h2 conform --verify CERT --plugin PATH` checks a certificate against a plugin file.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct ConformOptions {
  std::string plugin;
  int device = 0;
  std::vector<std::string> ops;
  std::vector<std::string> dtypes;
  bool quick = false;
  bool full = false;
  std::string report_dir;
  double timeout_seconds = 0;  // 0: the mode's default
  std::string verify;
};

void add_conform_command(CLI::App& app, ConformOptions& options, int& exit_code);
int run_conform(const ConformOptions& options);

}  // namespace h2::tools
