#include "plan_command.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "format.hpp"
#include "h2/heteroauto/search.hpp"
#include "table.hpp"

namespace h2::tools {

namespace {

using heteroauto::Plan;

std::string fixed(double value, int decimals, const char* suffix = "") {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f%s", decimals, value, suffix);
  return text;
}

std::string duration(double seconds) {
  if (seconds < 1e-4) return fixed(seconds * 1e6, 1, " us");
  return seconds < 1 ? fixed(seconds * 1e3, 1, " ms") : fixed(seconds, 3, " s");
}

// One line per plan: its shape and its predicted step time.
std::string summary(const Plan& plan) {
  std::string shape;
  for (const auto& p : plan.pipelines) {
    if (!shape.empty()) shape += " + ";
    shape += std::to_string(p.replicas.size()) + " x [";
    for (size_t k = 0; k < p.stages.size(); ++k) {
      const auto& s = p.stages[k];
      // Consecutive stages of one type and TP degree print once, with their count.
      size_t same = k;
      while (same + 1 < p.stages.size() && p.stages[same + 1].node_group == s.node_group &&
             p.stages[same + 1].tp == s.tp)
        ++same;
      shape += (k ? " " : "") + std::to_string(same - k + 1) + "x" + s.node_group + "/tp" + std::to_string(s.tp);
      k = same;
    }
    shape += "]";
  }
  return shape + ", micro-batch " + std::to_string(plan.micro_batch_size);
}

void print_plan(const Plan& plan, std::ostream& out) {
  for (size_t pi = 0; pi < plan.pipelines.size(); ++pi) {
    const auto& p = plan.pipelines[pi];
    std::string counts;
    for (const auto& r : p.replicas) counts += (counts.empty() ? "" : ",") + std::to_string(r.micro_batches);
    out << "  pipeline " << pi << ": " << p.replicas.size() << (p.replicas.size() == 1 ? " replica" : " replicas")
        << ", micro-batches per replica " << counts << ", bubble " << fixed(p.bubble_fraction * 100, 1, "%") << "\n";
    Table table({"stage", "node group", "device", "tp", "layers", "recompute", "fwd", "bwd", "memory/device",
                 "capacity", "to next"});
    for (size_t k = 0; k < p.stages.size(); ++k) {
      const auto& s = p.stages[k];
      table.add_row({std::to_string(k), s.node_group, s.device_type, std::to_string(s.tp),
                     std::to_string(s.first_layer) + "-" + std::to_string(s.first_layer + s.layers - 1),
                     heteroauto::to_string(s.recompute), duration(s.forward_s), duration(s.backward_s),
                     format_bytes(static_cast<uint64_t>(s.memory_bytes)),
                     format_bytes(static_cast<uint64_t>(s.capacity_bytes)),
                     k < p.transfer_s.size() ? duration(p.transfer_s[k]) : "-"});
    }
    table.print(out, 4);
  }
  const auto& e = plan.prediction;
  out << "  step time      " << duration(e.step_time_s) << " (pipeline " << duration(e.pipeline_time_s)
      << " + data-parallel allreduce " << duration(e.dp_allreduce_s) << ")\n"
      << "  throughput     " << format_rate(e.tokens_per_s, "tokens/s") << ", MFU " << fixed(e.mfu * 100, 1, "%")
      << "\n"
      << "  bubble         " << fixed(e.bubble_fraction * 100, 1, "%") << " of the pipeline phase\n"
      << "  devices        " << e.devices_used << " of " << e.devices_total << " used\n"
      << "  bottleneck     " << e.bottleneck << "\n";
}

nlohmann::json stats_json(const heteroauto::SearchStats& s) {
  return {{"layouts", s.layouts},
          {"pruned", s.pruned},
          {"partitioned", s.partitioned},
          {"infeasible", s.infeasible},
          {"combinations", s.combinations},
          {"simulated", s.simulated},
          {"groups", s.groups},
          {"seconds", s.seconds}};
}

}  // namespace

void add_plan_command(CLI::App& app, PlanOptions& options, int& exit_code) {
  CLI::App* command = app.add_subcommand("plan", "Plan a model's layout on a heterogeneous cluster (HeteroAuto)");
  command->add_option("--cluster", options.cluster, "Cluster description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--model", options.model, "Model description (JSON)")->required()->check(CLI::ExistingFile);
  command->add_option("--top", options.top, "How many of the best plans to show")->check(CLI::Range(1, 100));
  command->add_flag("--json", options.json, "Print JSON for programs instead of tables");
  command->add_flag("--explain", options.explain, "Show the search's reasoning and counts");
  command->add_option("-o,--output", options.output, "Write the best plan to this file (for h2 train --plan)");
  command->callback([&options, &exit_code] { exit_code = run_plan(options); });
}

int run_plan(const PlanOptions& options) {
  heteroauto::SearchResult result;
  try {
    const heteroauto::Cluster cluster = heteroauto::load_cluster(options.cluster);
    const heteroauto::Model model = heteroauto::load_model(options.model);
    result = heteroauto::search_plans(cluster, model, {.top = options.top});
    for (const Plan& plan : result.plans) heteroauto::check_plan_invariants(plan, cluster);
  } catch (const heteroauto::DescriptionError& e) {
    std::cerr << "h2 plan: " << e.what() << "\n";
    return 1;
  }

  if (!options.output.empty() && !result.plans.empty()) {
    const std::filesystem::path path(options.output), temporary(options.output + ".tmp");
    {
      std::ofstream out(temporary);
      out << heteroauto::to_json(result.plans[0]).dump(2) << "\n";
      if (!out.flush()) {
        std::cerr << "h2 plan: cannot write " << options.output << "\n";
        return 1;
      }
    }
    std::filesystem::rename(temporary, path);
  }

  if (options.json) {
    nlohmann::json plans = nlohmann::json::array();
    for (const Plan& plan : result.plans) plans.push_back(heteroauto::to_json(plan));
    nlohmann::json j = {{"plans", plans}, {"search", stats_json(result.stats)}};
    if (result.plans.empty()) j["infeasible"] = result.infeasible;
    if (options.explain) j["explanation"] = result.explanation;
    std::cout << j.dump(2) << "\n";
  } else {
    if (options.explain) {
      std::cout << "Search\n";
      for (const std::string& line : result.explanation) std::cout << "  " << line << "\n";
    }
    const auto& s = result.stats;
    std::cout << "Searched " << s.layouts << " layouts over " << s.groups << " node groups in " << duration(s.seconds)
              << ": " << s.pruned << " pruned by the bound, " << s.partitioned << " partitioned, " << s.combinations
              << " combinations, " << s.simulated << " simulated\n";
    for (size_t i = 0; i < result.plans.size(); ++i) {
      const Plan& plan = result.plans[i];
      std::cout << "\nPlan " << i + 1 << ": " << duration(plan.prediction.step_time_s) << " per step, " << summary(plan)
                << "\n";
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
