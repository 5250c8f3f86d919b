// A discrete-event simulator of one pipeline under the 1F1B schedule (PipeDream-Flush / Megatron):
// stage k runs min(p - k - 1, m) warm-up forwards, then alternates one forward and one backward,
// then drains its backwards. A forward waits for the previous stage's forward of the same
// micro-batch plus the transfer; a backward for the next stage's backward plus the transfer. Unequal
// stages, transfers and warm-up/cool-down effects come out exactly, which the closed form
// (sum + (m - 1) max) misses. GPipe (all forwards, then all backwards) is kept as a reference.
#pragma once

#include <vector>

#include "h2/heteroauto/schedule.hpp"

namespace h2::heteroauto {

struct PipelineTimes {
  std::vector<double> forward;   // per stage, per micro-batch
  std::vector<double> backward;  // per stage
  std::vector<double> transfer;  // between stage k and k + 1 (size p - 1), each direction
  // Whether a stage stays busy for each send's transfer before its next pass (DeepSpeed's pipeline
  // engine, whose sends block), or sends while it computes on (HeteroPP's). For predicting runs of
  // other runtimes; the search's closed-form estimates assume sends overlap.
  bool blocking_sends = false;
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

// When the input of stage `stage`'s pass `op` arrives, from the passes' completion times so far (per
// stage and micro-batch, -1 while not yet run): the previous stage's forward (the next stage's
// backward, or its own forward on the last stage) plus the transfer; -1 while that has not run.
double input_arrives(const PipelineTimes& times, const std::vector<std::vector<double>>& forward_end,
                     const std::vector<std::vector<double>>& backward_end, int stage, PassStep op);

// How long stage `stage` stays busy sending after a forward (or backward) pass: the transfer to the
// next (previous) stage where sends block, else 0.
double outgoing_send(const PipelineTimes& times, int stage, bool forward);

// Throws std::invalid_argument for an empty pipeline, m < 1 or mismatched sizes.
Simulation simulate_pipeline(const PipelineTimes& times, int micro_batches, Schedule schedule = Schedule::one_f_one_b);

// simulate_step simulates up to kExactMicroBatches + kRegimePeriod micro-batches op by op (for a
// pipeline of more than kExactMicroBatches / 2 stages, twice its stages + kRegimePeriod).
constexpr int kExactMicroBatches = 256;
constexpr int kRegimePeriod = 840;  // lcm(1, ..., 8)
// A step of `micro_batches` micro-batches for the planner, in time and memory that do not grow with
// them (a global batch of 10^7 samples took the planner 65 s and 1.4 GB when every micro-batch was
// simulated): up to kExactMicroBatches + kRegimePeriod it is simulate_pipeline's, without its ops
// (the planner reads makespans and busy times; simulate_pipeline gives timelines); beyond, the busy times are exact
// (each micro-batch adds its forward and backward to every stage) and the makespan is extrapolated by whole periods of
// kRegimePeriod from a simulated step past the pipeline's transient. A pipeline's regime adds the same time every c
// micro-batches; for c dividing 840 (every c up to 8) that is exact: within 1e-12 on random pipelines
// of up to 8 stages, and within 0.3% on up to 48 stages, whose regimes can have longer periods.
Simulation simulate_step(const PipelineTimes& times, int micro_batches, Schedule schedule = Schedule::one_f_one_b);

// A pipeline whose stages compute on a host's cores shared with others (description.hpp's SharedHost).
struct SharedPipeline {
  PipelineTimes times;  // at full speed: a stage alone on the host
  int micro_batches = 1;
  std::vector<double> demand;  // per stage: the cores its busy devices take at full speed (0: not on the host)
};
// The pipelines run at once, each in its schedule as simulate_pipeline runs it, while every busy stage
// with demand computes at min(1, cores / D) of its full speed, D the demand of all busy stages (a
// fluid processor-sharing model: the cores split evenly among the busy devices). Stages without
// demand and transfers keep their times. Every pass is simulated (no extrapolation: a shared host is
// one machine's simulated devices, with few micro-batches). One Simulation per pipeline, in order;
// `busy` counts wall time computing. Throws std::invalid_argument as simulate_pipeline does, and for
// cores <= 0 or a demand list of the wrong size.
std::vector<Simulation> simulate_shared(const std::vector<SharedPipeline>& pipelines, double cores,
                                        Schedule schedule = Schedule::one_f_one_b);

}  // namespace h2::heteroauto
