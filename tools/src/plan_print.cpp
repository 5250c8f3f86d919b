#include "plan_print.hpp"

#include "format.hpp"
#include "table.hpp"

namespace h2::tools {

using heteroauto::Plan;

// One line per plan: its shape and its predicted step time.
std::string plan_summary(const Plan& plan) {
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
  return shape + ", micro-batch " + std::to_string(plan.micro_batch_size) +
         (plan.distributed_optimizer ? ", distributed optimizer" : "");
}

void print_plan(const Plan& plan, std::ostream& out) {
  for (size_t pi = 0; pi < plan.pipelines.size(); ++pi) {
    const auto& p = plan.pipelines[pi];
    std::string counts;
    for (const auto& r : p.replicas) counts += (counts.empty() ? "" : ",") + std::to_string(r.micro_batches);
    out << "  pipeline " << pi << ": " << p.replicas.size() << (p.replicas.size() == 1 ? " replica" : " replicas")
        << ", micro-batches per replica " << counts << ", bubble " << format_fixed(p.bubble_fraction * 100, 1, "%")
        << "\n";
    Table table({"stage", "node group", "device", "tp", "layers", "recompute", "fwd", "bwd", "memory/device",
                 "capacity", "to next"});
    for (size_t k = 0; k < p.stages.size(); ++k) {
      const auto& s = p.stages[k];
      table.add_row({std::to_string(k), s.node_group, s.device_type, std::to_string(s.tp),
                     std::to_string(s.first_layer) + "-" + std::to_string(s.first_layer + s.layers - 1),
                     heteroauto::to_string(s.recompute), format_duration(s.forward_s), format_duration(s.backward_s),
                     format_bytes(static_cast<uint64_t>(s.memory_bytes)),
                     format_bytes(static_cast<uint64_t>(s.capacity_bytes)),
                     k < p.transfer_s.size() ? format_duration(p.transfer_s[k]) : "-"});
    }
    table.print(out, 4);
  }
  const auto& e = plan.prediction;
  // With one replica of everything the distributed optimizer has nothing to shard or gather.
  const bool sharded = plan.distributed_optimizer && plan.replica_count() > 1;
  out << "  step time      " << format_duration(e.step_time_s) << " (pipeline " << format_duration(e.pipeline_time_s)
      << (sharded ? " + exposed gradient reduce-scatter " : " + exposed data-parallel allreduce ")
      << format_duration(e.exposed_allreduce_s) << " of " << format_duration(e.dp_allreduce_s)
      << (e.optimizer_s > 0 ? " + optimizer " + format_duration(e.optimizer_s) : std::string())
      << (sharded ? " + gathering the updated weights " + format_duration(e.weight_gather_s) : std::string()) << ")\n"
      << "  throughput     " << format_rate(e.tokens_per_s, "tokens/s") << ", MFU " << format_fixed(e.mfu * 100, 1, "%")
      << "\n"
      << "  bubble         " << format_fixed(e.bubble_fraction * 100, 1, "%") << " of the pipeline phase\n"
      << "  devices        " << e.devices_used << " of " << e.devices_total << " used\n"
      << "  optimizer      "
      << (sharded                      ? "distributed: AdamW's state and update sharded over each layer's replicas, "
                                         "the updated weights gathered after the step"
          : plan.distributed_optimizer ? "distributed, with one replica: nothing to shard"
                                       : "replicated: every replica keeps AdamW's state and updates every weight")
      << "\n"
      << "  bottleneck     " << e.bottleneck << "\n";
  std::string basis;
  for (const auto& [type, how] : e.cost_basis) basis += (basis.empty() ? "" : ", ") + type + ": " + how;
  if (!basis.empty()) out << "  costs          " << basis << "\n";
}

}  // namespace h2::tools
