// The planners HeteroAuto is measured against, implemented on the same cost model, evaluator and
// simulator, so that only the decisions differ:
//  - even: Megatron-style uniform TP/PP/DP over every device, layers and micro-batches split evenly;
//  - homogeneous: the same, on the fastest device type only;
//  - flops_proportional: one pipeline over every device, layers in proportion to peak FLOP/s;
//  - metis_style: every stage ordering of the types and TP per type (Metis's device-group
//    enumeration), layers in proportion to each stage's speed with memory repair, micro-batches
//    split evenly over identical replicas.
// Each returns the best plan of its own space by simulated step time, or nothing when none fits.
#pragma once

#include <optional>

#include "h2/heteroauto/layout.hpp"

namespace h2::bench {

std::optional<heteroauto::Plan> even_baseline(const heteroauto::Evaluator& evaluator);
std::optional<heteroauto::Plan> homogeneous_baseline(const heteroauto::Evaluator& evaluator);
std::optional<heteroauto::Plan> flops_proportional_baseline(const heteroauto::Evaluator& evaluator);
std::optional<heteroauto::Plan> metis_style_baseline(const heteroauto::Evaluator& evaluator);

}  // namespace h2::bench
