#include "runnable_plan.hpp"

#include <algorithm>

#include "h2/error.hpp"
#include "h2/heteropp/placement.hpp"

namespace h2::tools {

std::string why_heteropp_refuses(const heteroauto::Plan& plan) {
  try {
    heteropp::place(plan);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

RunnablePlan best_runnable_plan(const heteroauto::Cluster& cluster, const heteroauto::Model& model,
                                heteroauto::SearchResult found, heteroauto::SearchOptions options) {
  if (found.plans.empty()) throw heteroauto::DescriptionError("nothing fits: " + found.infeasible);
  const std::string best_refused = why_heteropp_refuses(found.plans.front());
  const auto runs = [](const heteroauto::Plan& p) { return why_heteropp_refuses(p).empty(); };
  auto runnable = std::find_if(found.plans.begin(), found.plans.end(), runs);
  // Nearly always the best plan runs; a wider search (seconds on a large cluster) only when none does.
  if (runnable == found.plans.end() && options.top < 50) {
    options.top = 50;
    found = heteroauto::search_plans(cluster, model, options);
    runnable = std::find_if(found.plans.begin(), found.plans.end(), runs);
  }
  if (runnable == found.plans.end())
    throw heteroauto::DescriptionError("HeteroPP runs none of HeteroAuto's " + std::to_string(found.plans.size()) +
                                       " best plans; the best one: " + best_refused + " (try a lower --max-tp)");
  return {*runnable, static_cast<size_t>(runnable - found.plans.begin()), best_refused};
}

}  // namespace h2::tools
