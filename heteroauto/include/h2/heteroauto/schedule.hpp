// The order in which one pipeline stage runs its micro-batches' forward and backward passes.
//
// GPipe: every forward, then every backward. 1F1B (PipeDream-flush, Megatron's default): stage k of
// S first runs min(S - k - 1, m) forwards, then alternates one forward and one backward, then drains
// the remaining backwards; at most S - k micro-batches are in flight, so activation memory is bounded
// by the pipeline depth instead of m. Both orders are deadlock-free with blocking receives and
// asynchronous sends: every stage consumes its neighbours' messages in the order they are sent.
//
// Written once for the planner's simulator and HeteroPP's runtime, so that what HeteroAuto predicts
// is the order HeteroPP runs.
#pragma once

#include <string>
#include <vector>

namespace h2::heteroauto {

enum class Schedule { one_f_one_b, gpipe };

struct PassStep {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PassStep&) const = default;
};

std::vector<PassStep> stage_schedule(heteroauto::Schedule schedule, int stage, int stages, int micro_batches);

// "F0 F1 B0 F2 B1 B2", for tests and logs.
std::string schedule_string(const std::vector<PassStep>& steps);

}  // namespace h2::heteroauto
