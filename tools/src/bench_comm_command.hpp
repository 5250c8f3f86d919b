// `h2 bench comm`: DiComm's bandwidth and latency per collective and message size, run on every
// rank of a job (`h2 launch -n N -- h2 bench comm`), printed by rank 0 as an nccl-tests-style table
// (size, count, time, algbw, busbw, wrong elements) and optionally as JSON lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace h2::tools {

struct BenchCommOptions {
  std::string op = "allreduce";  // allreduce, allgather, reduce_scatter, broadcast, sendrecv or all
  uint64_t min_bytes = 1 << 20;
  uint64_t max_bytes = 64 << 20;
  int factor = 2;
  int iterations = 20;
  int warmup = 3;
  uint64_t scale_below = 0;  // sizes below it run iterations x min(8, scale_below / size)
  std::string dtype = "f32";
  std::string reduce = "sum";
  std::string json;                         // JSON lines, one per row, written by rank 0
  std::vector<std::string> plugin_options;  // --plugin-option PLUGIN:KEY=VALUE
};

void add_bench_command(CLI::App& app, BenchCommOptions& options, int& exit_code);
int run_bench_comm(const BenchCommOptions& options);

}  // namespace h2::tools
