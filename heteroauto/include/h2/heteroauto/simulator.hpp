// A discrete-event simulator of one pipeline under the 1F1B schedule (PipeDream-Flush / Megatron):
// stage k runs min(p - k - 1, m) warm-up forwards, then alternates one forward and one backward,
// then drains its backwards. A forward waits for the previous stage's forward of the same
// micro-batch plus the transfer; a backward for the next stage's backward plus the transfer. Unequal
// stages, transfers and warm-up/cool-down effects come out exactly, which the closed form
// (sum + (m - 1) max) misses. GPipe (all forwards, then all backwards) is kept as a reference.
#pragma once

#include <vector>

namespace h2::heteroauto {

enum class Schedule { one_f_one_b, gpipe };

struct PipelineTimes {
  std::vector<double> forward;   // per stage, per micro-batch
  std::vector<double> backward;  // per stage
  std::vector<double> transfer;  // between stage k and k + 1 (size p - 1), each direction
};

struct SimulatedOp {
  int stage, micro_batch;
  bool backward;
  double start, end;
};

struct Simulation {
  double makespan = 0;           // first forward start to last backward end
  std::vector<double> busy;      // per stage: time computing
  double bubble_fraction = 0;    // 1 - sum(busy) / (p * makespan)
  std::vector<SimulatedOp> ops;  // every forward and backward, for timelines
};

// Throws std::invalid_argument for an empty pipeline, m < 1 or mismatched sizes.
Simulation simulate_pipeline(const PipelineTimes& times, int micro_batches, Schedule schedule = Schedule::one_f_one_b);

}  // namespace h2::heteroauto
