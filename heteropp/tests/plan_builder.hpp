// Hand-made plans for HeteroPP's tests: pipeline classes with chosen layer splits and micro-batch
// counts on one node group of identical devices, ranks and devices handed out in order.
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "h2/heteroauto/plan.hpp"

namespace h2::heteropp::test {

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
