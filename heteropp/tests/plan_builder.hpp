// Hand-made plans for HeteroPP's tests: pipeline classes with chosen layer splits and micro-batch
// counts on one node group of identical devices, ranks and devices handed out in order; and the
// cluster description of that node group ("cpu", devices of type "cpu-ref").
#pragma once

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "h2/heteroauto/plan.hpp"

namespace h2::heteropp::test {

// One node of `devices` cpu-ref devices; `plugin` "" leaves the device type without one.
inline nlohmann::json cpu_cluster_json(const std::string& plugin, int devices) {
  nlohmann::json type = {{"name", "cpu-ref"},
                         {"vendor", "H2"},
                         {"peak_tflops", {{"f32", 0.03}, {"f16", 0.03}, {"bf16", 0.03}}},
                         {"memory_gib", 1},
                         {"runtime_overhead_gib", 0.1}};
  if (!plugin.empty()) type["plugin"] = plugin;
  return {{"name", "test"},
          {"device_types", {type}},
          {"nic_types", {{{"name", "lo"}, {"type", "ethernet"}, {"bandwidth_gbps", 10}}}},
          {"nodes",
           {{{"name", "cpu"},
             {"device_type", "cpu-ref"},
             {"count", 1},
             {"devices_per_node", devices},
             {"intra_node_bandwidth_gbps", 20},
             {"nic", "lo"}}}}};
}

struct ClassSpec {
  std::vector<std::pair<int, int>> stages;  // (first block, blocks) per stage
  std::vector<int> micro_batches;           // per replica
  std::vector<size_t> recomputed;           // stages that recompute their activations in backward
  std::vector<int> tp = {};                 // per stage (default 1): devices of its tensor-parallel group
};

inline heteroauto::Plan make_plan(const heteroauto::Model& model, int micro_batch_size,
                                  const std::vector<ClassSpec>& classes, const std::string& group = "cpu",
                                  const std::string& device_type = "cpu-ref") {
  heteroauto::Plan plan;
  plan.cluster = "test";
  plan.model = model;
  plan.micro_batch_size = micro_batch_size;
  plan.prediction.bottleneck = "none: a hand-made test plan";
  int next = 0;
  for (const ClassSpec& spec : classes) {
    heteroauto::PlanPipeline pipeline;
    for (auto [first, layers] : spec.stages) {
      heteroauto::PlanStage stage;
      if (std::find(spec.recomputed.begin(), spec.recomputed.end(), pipeline.stages.size()) != spec.recomputed.end())
        stage.recompute = heteroauto::Recompute::full;
      stage.node_group = group;
      stage.device_type = device_type;
      stage.first_layer = first;
      stage.layers = layers;
      if (pipeline.stages.size() < spec.tp.size()) stage.tp = spec.tp[pipeline.stages.size()];
      pipeline.stages.push_back(stage);
    }
    pipeline.transfer_s.assign(spec.stages.size() - 1, 0.0);
    for (int m : spec.micro_batches) {
      heteroauto::PlanReplica replica;
      replica.micro_batches = m;
      for (const heteroauto::PlanStage& stage : pipeline.stages) {
        replica.devices.emplace_back();
        for (int i = 0; i < stage.tp; ++i, ++next) replica.devices.back().push_back({group, 0, next, next});
      }
      pipeline.replicas.push_back(replica);
    }
    plan.pipelines.push_back(pipeline);
  }
  return plan;
}

}  // namespace h2::heteropp::test
