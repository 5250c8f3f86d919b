// The reference optimum for the planner benchmark: the planner's whole space searched without any
// of its shortcuts. Every layout (set partition of the groups into classes, stage ordering, TP per
// group, replica count, micro-batch size), every split of the layers over each class's stages with
// the fastest recomputation that fits, every combination of classes, and micro-batches split
// exactly on simulated 1F1B times (greedy is exact for non-decreasing times). Only for small
// clusters and shallow models; stops at a budget and says so.
#pragma once

#include "h2/heteroauto/layout.hpp"

namespace h2::bench {

struct ExhaustiveResult {
  double step_time_s = 0;  // 0 when nothing fits
  long plans = 0;          // complete plans evaluated
  bool complete = true;    // false when the budget stopped it
};

ExhaustiveResult exhaustive_search(const heteroauto::Evaluator& evaluator, int max_classes, long budget);

}  // namespace h2::bench
