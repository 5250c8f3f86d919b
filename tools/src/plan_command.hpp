// `h2 plan`: the best layouts of a model on a heterogeneous cluster (HeteroAuto), as a readable
// table, as JSON, and as the plan file that `h2 train --plan` executes.
#pragma once

#include <string>

#include "h2/heteroauto/cost_model.hpp"

namespace CLI {
class App;
}

namespace h2::tools {

struct PlanOptions {
  std::string cluster;
  std::string model;
  int top = 3;
  int max_tp = 0;  // the largest tensor-parallel degree; 0: any the model and node groups allow
  bool json = false;
  bool explain = false;
  bool distributed_optimizer = false;      // plan every layout for AdamW's moments sharded over replicas
  bool no_distributed_optimizer = false;   // never plan for it (by default the search chooses per plan)
  std::string grad_comm_dtype = "f32";     // as h2 train's --grad-comm-dtype
  std::string overlap_grad_reduce = "on";  // as h2 train's --overlap-grad-reduce
  std::string output;                      // the best plan, as a plan file
};

// The cost model's gradient settings for h2 train's (and h2 plan's) flags of the same names.
heteroauto::GradientSettings gradient_settings(bool distributed_optimizer, const std::string& grad_comm_dtype,
                                               const std::string& overlap_grad_reduce);

// --distributed-optimizer and --no-distributed-optimizer, the same on h2 plan and h2 train: with
// neither, the search plans with and without it and keeps the faster.
void add_distributed_optimizer_flags(CLI::App& command, bool& always, bool& never, const std::string& always_help);

void add_plan_command(CLI::App& app, PlanOptions& options, int& exit_code);
int run_plan(const PlanOptions& options);

}  // namespace h2::tools
