#include "plan_command.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "format.hpp"
#include "h2/error.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/search.hpp"
#include "plan_print.hpp"

namespace h2::tools {

namespace {

using heteroauto::Plan;

nlohmann::json stats_json(const heteroauto::SearchStats& s) {
  return {{"layouts", s.layouts},
          {"pruned", s.pruned},
          {"partitioned", s.partitioned},
          {"infeasible", s.infeasible},
          {"combinations", s.combinations},
          {"simulated", s.simulated},
          {"groups", s.groups},
          {"searches", s.searches},
          {"seconds", s.seconds}};
}

}  // namespace

heteroauto::GradientSettings gradient_settings(bool distributed_optimizer, const std::string& grad_comm_dtype,
                                               const std::string& overlap_grad_reduce) {
  return {.distributed_optimizer = distributed_optimizer,
          .comm_bytes = grad_comm_dtype == "f32" ? 4 : 2,
          .overlap = overlap_grad_reduce == "on"};
}

void add_distributed_optimizer_flags(CLI::App& command, bool& always, bool& never, const std::string& always_help) {
  CLI::Option* on = command.add_flag("--distributed-optimizer", always, always_help);
  command
      .add_flag("--no-distributed-optimizer", never,
                "Never shard AdamW's moments over the replicas; without either flag HeteroAuto plans with and "
                "without the distributed optimizer and keeps whichever plan is faster")
      ->excludes(on);
}

void add_plan_command(CLI::App& app, PlanOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand("plan", "Plan a model's layout on a heterogeneous cluster (HeteroAuto)");
  command->add_option("--cluster", options.cluster, "Cluster description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "Model description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--top", options.top, "How many of the best plans to show")->check(CLI::Range(1, 100));
  command
      ->add_option("--max-tp", options.max_tp,
                   "Largest tensor-parallel degree to consider (as h2 train --max-tp); 0, the default: any the model "
                   "and the node groups allow")
      ->check(CLI::Range(0, 64));
  add_distributed_optimizer_flags(*command, options.distributed_optimizer, options.no_distributed_optimizer,
                                  "Plan every layout for AdamW's moments sharded over each layer's replicas (h2 train "
                                  "--distributed-optimizer)");
  command
      ->add_option("--grad-comm-dtype", options.grad_comm_dtype,
                   "Plan for gradients travelling between replicas in this dtype (as h2 train --grad-comm-dtype)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  command
      ->add_option("--overlap-grad-reduce", options.overlap_grad_reduce,
                   "Plan for gradient sums that overlap the last backward pass, or not (as h2 train "
                   "--overlap-grad-reduce)")
      ->capture_default_str()
      ->check(CLI::IsMember({"on", "off"}));
  command->add_flag("--json", options.json, "Print JSON for programs instead of tables");
  command->add_flag("--explain", options.explain, "Show the search's reasoning and counts");
  command->add_option("-o,--output", options.output,
                      "Write the best plan that h2 train runs to this file (for h2 train --plan)");
  command->callback([&options, &exit_code] { exit_code = run_plan(options); });
}

int run_plan(const PlanOptions& options) {
  heteroauto::SearchResult result;
  try {
    const heteroauto::Cluster cluster = heteroauto::load_cluster(options.cluster);
    const heteroauto::Model model = heteroauto::load_model(options.model);
    const heteroauto::SearchOptions search{
        .top = options.top,
        .max_tp = options.max_tp,
        .gradients =
            gradient_settings(options.distributed_optimizer, options.grad_comm_dtype, options.overlap_grad_reduce),
        .choose_distributed_optimizer = !options.no_distributed_optimizer};
    result = heteroauto::search_plans(cluster, model, search);
    for (const Plan& plan : result.plans) heteroauto::check_plan_invariants(plan, cluster);
    // -o is for h2 train --plan: the best plan, as h2 train itself would take.
    if (!options.output.empty() && !result.plans.empty())
      write_file_atomically(options.output, heteroauto::to_json(result.plans.front()).dump(2) + "\n");
  } catch (const heteroauto::DescriptionError& e) {
    std::cerr << "h2 plan: " << e.what() << (options.output.empty() ? "" : "; nothing written to " + options.output)
              << "\n";
    return 1;
  } catch (const Error& e) {
    std::cerr << "h2 plan: " << e.what() << "\n";
    return 1;
  }

  if (options.json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const Plan& plan : result.plans) plans.push_back(heteroauto::to_json(plan));
    nlohmann::json calibration = nlohmann::json::array();
    for (const heteroauto::CalibrationFit& fit : result.calibration) calibration.push_back(heteroauto::to_json(fit));
    nlohmann::json j = {{"plans", plans}, {"search", stats_json(result.stats)}, {"calibration", calibration}};
    if (result.plans.empty()) j["infeasible"] = result.infeasible;
    if (options.explain) j["explanation"] = result.explanation;
    std::cout << j.dump(2) << "\n";
  } else {
    if (options.explain) {
      std::cout << "Search\n";
      for (const std::string& line : result.explanation) std::cout << "  " << line << "\n";
    }
    const auto& s = result.stats;
    std::cout << "Searched " << s.layouts << " layouts over " << s.groups << " node groups"
              << (s.searches == 2 ? ", with and without the distributed optimizer," : "") << " in "
              << format_duration(s.seconds) << ": " << s.pruned << " pruned by the bound, " << s.partitioned
              << " partitioned, " << s.combinations << " combinations, " << s.simulated << " simulated\n";
    for (size_t i = 0; i < result.plans.size(); ++i) {
      const Plan& plan = result.plans[i];
      std::cout << "\nPlan " << i + 1 << ": " << format_duration(plan.prediction.step_time_s) << " per step, "
                << plan_summary(plan) << "\n";
      if (i == 0 || options.explain) print_plan(plan, std::cout);
    }
    if (!options.output.empty() && !result.plans.empty())
      std::cout << "\nWrote the best plan to " << options.output << "\n";
  }
  if (result.plans.empty()) {
    std::cerr << "h2 plan: nothing fits: " << result.infeasible << "\n";
    return 1;
  }
  return 0;
}

}  // namespace h2::tools
