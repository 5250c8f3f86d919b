// What the micro-benchmarks share: Google Benchmark's console table, keeping each benchmark's
// nanoseconds per call (an iteration makes several calls) for the summary printed after the run,
// and the `--json FILE` option they take next to Google Benchmark's own flags.
#pragma once

#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

namespace h2::bench {

class PerCallReporter : public benchmark::ConsoleReporter {
 public:
  explicit PerCallReporter(int calls_per_iteration) : calls_(calls_per_iteration) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs)
      ns_per_call_[run.benchmark_name()] =
          run.GetAdjustedRealTime() / calls_ * (run.time_unit == benchmark::kMicrosecond ? 1e3 : 1.0);
  }

  // The median of the repetitions when there are several, else the single run.
  double ns(const std::string& name) const {
    auto median = ns_per_call_.find(name + "_median");
    if (median != ns_per_call_.end()) return median->second;
    auto single = ns_per_call_.find(name);
    return single != ns_per_call_.end() ? single->second : 0;
  }

 private:
  int calls_;
  std::map<std::string, double> ns_per_call_;
};

// Initializes Google Benchmark from argv without `--json FILE`, whose FILE is returned ("" when
// absent). Returns false on a flag Google Benchmark does not know (it has said which).
inline bool initialize(int argc, char** argv, std::string& json_path) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else
      args.push_back(argv[i]);
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  return !benchmark::ReportUnrecognizedArguments(count, args.data());
}

}  // namespace h2::bench
