// A training plan: what HeteroPP executes and what `h2 plan` prints. One or more pipeline classes;
// every replica of a class runs the same stages (device type, tensor-parallel degree, layer range,
// recomputation) on its own devices, with its own number of micro-batches (asymmetric data
// parallelism: faster replicas take more). Layer ranges may differ between classes; each layer's
// gradients are averaged over every replica that holds it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "h2/heteroauto/description.hpp"

namespace h2::heteroauto {

// One device of the cluster: node `node` (0-based) of node group `node_group`, local index `device`.
struct DeviceRef {
  std::string node_group;
  int node = 0;
  int device = 0;
  int rank = 0;  // the process rank that drives it: consecutive over pipelines, replicas, stages, TP
  bool operator==(const DeviceRef&) const = default;
};

struct PlanStage {
  std::string node_group;  // as named in the cluster description (canonical group: see search.hpp)
  std::string device_type;
  int tp = 1;
  int first_layer = 0;  // layers [first_layer, first_layer + layers)
  int layers = 0;
  Recompute recompute = Recompute::none;
  double forward_s = 0, backward_s = 0;  // per micro-batch
  double memory_bytes = 0;               // per device, at the replica's micro-batch count
  double capacity_bytes = 0;             // per device, after the runtime overhead
};

struct PlanReplica {
  int micro_batches = 0;
  std::vector<std::vector<DeviceRef>> devices;  // per stage, its `tp` devices
  double pipeline_time_s = 0;                   // simulated 1F1B makespan
};

struct PlanPipeline {
  std::vector<PlanStage> stages;
  std::vector<double> transfer_s;  // between stage k and k + 1, per micro-batch, each direction
  std::vector<PlanReplica> replicas;
  double bubble_fraction = 0;  // of its slowest replica
};

struct PlanPrediction {
  double step_time_s = 0;          // slowest replica's pipeline + exposed data-parallel sums + optimizer + gather
  double pipeline_time_s = 0;      // slowest replica's simulated 1F1B makespan
  double dp_allreduce_s = 0;       // the slowest stage's gradient averaging, whole (a reduce-scatter with
                                   // the distributed optimizer)
  double exposed_allreduce_s = 0;  // what of it the pipeline does not hide (after its end)
  double optimizer_s = 0;          // the slowest stage's optimizer step (0 without measured profiles)
  double weight_gather_s = 0;      // the distributed optimizer's gather of the updated weights (after it)
  double tokens_per_s = 0;
  double mfu = 0;              // model FLOPs per step / (step time x peak of the devices used)
  double bubble_fraction = 0;  // idle share of the used stages' time in the pipeline phase
  std::string bottleneck;      // in words
  // Where the stage times come from, per used device type: "measured" (h2 profile) or "peak x efficiency".
  std::map<std::string, std::string> cost_basis;
  int devices_used = 0;
  int devices_total = 0;
};

struct Plan {
  std::string cluster;
  Model model;
  int micro_batch_size = 0;
  // Memory was planned for AdamW's moments sharded over the replicas (HeteroPP's distributed optimizer).
  bool distributed_optimizer = false;
  std::vector<PlanPipeline> pipelines;
  PlanPrediction prediction;

  int replica_count() const;
  int micro_batch_count() const;  // over every replica: x micro_batch_size = global batch
};

// The plan file ("format": "h2-plan", "version": 1). plan_from_json checks the invariants (layers
// cover the model once per pipeline, no device twice, micro-batches x size = global batch) and
// throws DescriptionError naming the field otherwise.
nlohmann::json to_json(const Plan& plan);
Plan plan_from_json(const nlohmann::json& json);
// Reads a plan file; errors start "plan PATH: ".
Plan load_plan(const std::string& path);
// Throws DescriptionError when an invariant fails; the message names the pipeline/stage/device.
void check_plan_invariants(const Plan& plan, const Cluster& cluster);

}  // namespace h2::heteroauto
