// `h2 launch`: starts N local ranks of a program with DiComm's environment set (H2_RANK, H2_WORLD_SIZE,
// H2_MASTER_ADDR/PORT, H2_JOB_TOKEN, H2_DEVICE), prefixes their output, forwards signals, and stops
// every rank when one fails.
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct LaunchOptions {
  int ranks = 0;
  std::string devices;  // PLUGIN[:INDEX], one for all ranks or one per rank, comma-separated
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port on master_addr
  double grace_seconds = 5;
  bool no_prefix = false;
  std::string bind = "none";         // none, or cores: each rank its own share of the launcher's CPUs
  std::vector<std::string> command;  // after `--`
};

void add_launch_command(CLI::App& app, LaunchOptions& options, int& exit_code);

// Runs the job; returns the launcher's exit code (0 when every rank exited 0; see rank_processes.hpp).
int run_launch(const LaunchOptions& options);

// The H2_DEVICE value of each rank from --devices ("" when not given: no H2_DEVICE). Throws
// std::invalid_argument naming the bad entry or the wrong count.
std::vector<std::string> device_per_rank(const std::string& devices, int ranks);

// `--bind cores`: the CPUs of each rank, from `allowed` (the launcher's own, in order). With no more
// ranks than CPUs each rank gets a contiguous block (sizes differ by at most one); with more, rank r
// gets CPU r mod the count, so ranks spread evenly over them.
std::vector<std::vector<int>> cpus_per_rank(const std::vector<int>& allowed, int ranks);

}  // namespace h2::tools
