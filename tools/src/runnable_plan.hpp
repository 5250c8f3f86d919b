// HeteroAuto may cut one layer with different tensor-parallel degrees in two pipeline classes, which
// HeteroPP does not run yet (its placement refuses the plan). `h2 train` and `h2 plan -o` both take
// the best plan that HeteroPP runs, and `h2 plan` marks the ones it does not.
#pragma once

#include <string>

#include "h2/heteroauto/search.hpp"

namespace h2::tools {

// Why HeteroPP refuses `plan`, or "" when it runs it.
std::string why_heteropp_refuses(const heteroauto::Plan& plan);

struct RunnablePlan {
  heteroauto::Plan plan;
  size_t place = 0;          // its place among HeteroAuto's plans (0: the best)
  std::string best_refused;  // why the best plan was refused, when place > 0
};

// The best of `found` (a search of `options`) that HeteroPP runs; when none of it runs, the best of a
// search for the 50 best. Throws heteroauto::DescriptionError when none of those runs either.
RunnablePlan best_runnable_plan(const heteroauto::Cluster& cluster, const heteroauto::Model& model,
                                heteroauto::SearchResult found, heteroauto::SearchOptions options);

}  // namespace h2::tools
