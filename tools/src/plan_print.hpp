// A plan as people read it, shared by `h2 plan` and `h2 train`.
#pragma once

#include <ostream>
#include <string>

#include "h2/heteroauto/plan.hpp"

namespace h2::tools {

// "1 x [2xlocal-2gib/tp1] + 1 x [1xlocal-1gib/tp1], micro-batch 4"
std::string plan_summary(const heteroauto::Plan& plan);
// Its pipelines' stage tables and the prediction.
void print_plan(const heteroauto::Plan& plan, std::ostream& out);

}  // namespace h2::tools
