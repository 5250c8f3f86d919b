// The exact layer partition of one pipeline: given its stages in order (device type, TP degree,
// position), the micro-batch size and count, choose each stage's contiguous layer count (>= 1,
// summing to L) and recomputation so that the slowest stage is as fast as possible and every stage
// fits its devices' memory under 1F1B (stage k holds min(m, p - k) micro-batches of activations).
// Bottleneck search: a stage's largest feasible layer count is monotone in the allowed time, so the
// smallest feasible bottleneck is found by binary search over the candidate stage times.
#pragma once

#include <string>
#include <vector>

#include "h2/heteroauto/cost_model.hpp"

namespace h2::heteroauto {

struct Partition {
  bool feasible = false;
  std::vector<StageSpec> stages;  // with layers and recompute filled in
  double bottleneck = 0;          // the slowest stage's forward + backward per micro-batch
  std::string binding;            // when infeasible: the constraint that binds, in words
};

// Sets `stage.recompute` to the fastest option under which its layers fit its devices with
// `in_flight` micro-batches of activations; false (and the stage unchanged) when none fits.
bool choose_recompute(const CostModel& cost, StageSpec& stage, int micro_batch, int in_flight);

// `stages` give nodes, tp, first/last; their layers and recompute are ignored.
Partition partition_layers(const CostModel& cost, std::vector<StageSpec> stages, int micro_batch, int micro_batches);

}  // namespace h2::heteroauto
