// Devices that share one machine's cores (SharedHost): the description names them, and the evaluator
// slows the passes that compute at once, across replicas, and the optimizer step that every device
// takes at once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// One group of four devices on a host of `cores` cores (no shared host for cores 0).
json host_cluster(double cores) {
  json cluster = json::parse(R"({
    "name": "host",
    "device_types": [{"name": "cpu", "vendor": "H2", "peak_tflops": {"bf16": 1}, "memory_gib": 4,
                      "efficiency": 0.5, "runtime_overhead_gib": 0.1}],
    "nic_types": [{"name": "loop", "type": "ethernet", "bandwidth_gbps": 10, "latency_us": 20}],
    "nodes": [{"name": "here", "device_type": "cpu", "count": 1, "devices_per_node": 4,
               "intra_node_bandwidth_gbps": 20, "intra_node_latency_us": 6, "nic": "loop"}]
  })");
  if (cores > 0) cluster["shared_host"] = {{"cores", cores}, {"node_groups", {"here"}}};
  return cluster;
}

struct HostPlan {
  explicit HostPlan(double cores)
      : canonical(canonicalize(parse_cluster(host_cluster(cores)))),
        model(parse_model(test::small_model())),
        evaluator(canonical, model) {}
  // `replicas` pipelines of `stages` stages (the model's layers split evenly), tp 1, micro-batch 1.
  Plan plan(int stages, int replicas) const {
    ClassLayout layout{{{0, 1, stages}}, replicas};
    PartitionedClass c{layout, evaluator.stage_specs(layout)};
    for (StageSpec& s : c.stages) s.layers = model.layers / stages;
    const int micro_batches = static_cast<int>(model.global_batch) / replicas;
    return evaluator.build_plan({c}, {{micro_batches, 0}}, 1);
  }
  CanonicalCluster canonical;
  Model model;
  Evaluator evaluator;
};

TEST(SharedHost, PassesThatComputeAtOnceShareTheHostsCores) {
  // Two stages: with two cores (one per device) the pipeline is the unshared one; with one core, the
  // passes that overlap in 1F1B's steady state take twice as long.
  const Plan unshared = HostPlan(0).plan(2, 1), spare = HostPlan(2).plan(2, 1), one_core = HostPlan(1).plan(2, 1);
  EXPECT_DOUBLE_EQ(spare.prediction.pipeline_time_s, unshared.prediction.pipeline_time_s);
  const PlanPipeline& p = unshared.pipelines.front();
  const double work = 8 * (p.stages[0].forward_s + p.stages[0].backward_s + p.stages[1].forward_s +
                           p.stages[1].backward_s);  // 8 micro-batches
  EXPECT_GT(one_core.prediction.pipeline_time_s, unshared.prediction.pipeline_time_s * 1.15);
  EXPECT_GE(one_core.prediction.pipeline_time_s, work * (1 - 1e-9));  // one core does all the work
  EXPECT_THAT(one_core.prediction.bottleneck, HasSubstr("2 devices compute on the host's 1 shared cores"));
  // Replicas share the cores too: two replicas of one stage each on two cores are the unshared plan,
  // on one core each replica's passes take twice as long.
  const Plan two_replicas = HostPlan(0).plan(1, 2), shared_replicas = HostPlan(1).plan(1, 2);
  EXPECT_NEAR(shared_replicas.prediction.pipeline_time_s, 2 * two_replicas.prediction.pipeline_time_s,
              1e-9 * two_replicas.prediction.pipeline_time_s);
}

TEST(SharedHost, DescriptionErrorsNameTheField) {
  json c = host_cluster(2);
  c["shared_host"]["node_groups"] = {"there"};
  try {
    parse_cluster(c);
    FAIL() << "an unknown group was accepted";
  } catch (const DescriptionError& e) {
    EXPECT_THAT(e.what(), HasSubstr("shared_host.node_groups[0]: 'there' is not one of nodes"));
  }
  c = host_cluster(2);
  c["shared_host"]["cores"] = 0;
  EXPECT_THROW(parse_cluster(c), DescriptionError);
  // The shared host keeps a group from merging with an identical one off it.
  c = host_cluster(2);
  c["nodes"].push_back(c["nodes"][0]);
  c["nodes"][1]["name"] = "elsewhere";
  EXPECT_EQ(canonicalize(parse_cluster(c)).cluster.nodes.size(), 2u);
}

}  // namespace
}  // namespace h2::heteroauto
