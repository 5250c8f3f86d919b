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
      pipeline.stages.push_back(stage);
    }
    pipeline.transfer_s.assign(spec.stages.size() - 1, 0.0);
    for (int m : spec.micro_batches) {
      heteroauto::PlanReplica replica;
      replica.micro_batches = m;
      for (size_t k = 0; k < spec.stages.size(); ++k) {
        replica.devices.push_back({{group, 0, next, next}});
        ++next;
      }
      pipeline.replicas.push_back(replica);
    }
    plan.pipelines.push_back(pipeline);
  }
  return plan;
}

}  // namespace h2::heteropp::test
