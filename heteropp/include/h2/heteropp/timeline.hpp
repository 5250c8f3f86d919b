// A rank's timeline as Chrome-trace events ("X" complete events, microseconds; open in Perfetto or
// chrome://tracing). Every rank is one process row, named after its role. Times come from the
// monotonic clock, which all processes of one machine share, so the ranks' rows line up. A rank's
// row has two threads: the stage's passes and pipeline messages (kStageThread), and the gradient
// sums that run beside the backward pass (kGradientThread); both may add events at once.
#pragma once

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace h2::heteropp {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr int kStageThread = 0;
  static constexpr int kGradientThread = 1;

  Timeline(int rank, std::string label) : rank_(rank), label_(std::move(label)) {}

  // `category`: "compute", "comm", "optimizer", "checkpoint".
  void add(const std::string& name, const char* category, Clock::time_point start, Clock::time_point end,
           nlohmann::json args = nullptr, int thread = kStageThread);
  // The events, with metadata naming the process row.
  nlohmann::json events() const;
  // {"traceEvents": [...]} of several ranks' event arrays (each as returned by events()).
  static nlohmann::json merge(const std::vector<nlohmann::json>& ranks);

 private:
  int rank_;
  std::string label_;
  mutable std::mutex mutex_;
  std::vector<nlohmann::json> events_;
};

}  // namespace h2::heteropp
