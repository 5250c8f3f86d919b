// HeteroAuto's cost model (docs/ARCHITECTURE.md, "HeteroAuto"): per-stage compute time per
// micro-batch on a device type (times measured by `h2 profile` where the cluster gives them for the
// model, else analytic FLOPs / (peak x efficiency)), the optimizer's time per step, tensor-parallel allreduces inside a
// node, per-device memory under 1F1B, pipeline point-to-point transfers over the links each hop crosses and
// data-parallel allreduces (the evaluator, layout.hpp, decides which links and how many devices share a node's NICs).
// All times are in seconds, memory in bytes.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "h2/heteroauto/description.hpp"

namespace h2::heteroauto {

inline constexpr double kGiB = 1024.0 * 1024 * 1024;

// Bytes for messages, in the largest unit that keeps a digit before the point ("1.50 GiB", "15.36 MiB").
std::string format_memory(double bytes);

// One pipeline stage as the cost model sees it.
struct StageSpec {
  const NodeGroup* nodes = nullptr;  // where the stage's devices live (type, intra-node link, NIC)
  int tp = 1;                        // tensor-parallel degree (devices of the stage)
  int layers = 0;
  bool first = false;  // holds the embedding
  bool last = false;   // holds the final norm, LM head and the loss
  Recompute recompute = Recompute::none;
  // The pipeline class's replicas: at least that many ranks hold each of the stage's layers.
  int replicas = 1;
  // Every class's replicas, once the classes of a plan are known (each class's pipeline holds every
  // layer): the ranks over which a distributed optimizer shards each layer's AdamW state and update.
  // 0 while only the stage's own class is known (a class is partitioned before classes are combined).
  int holders = 0;
  int shards() const { return std::max({1, replicas, holders}); }
};

struct StageTime {
  double forward = 0, backward = 0;  // per micro-batch, communication inside the stage included
};

// What HeteroPP will be told to do with the gradients, which changes the step's cost: the flags
// `h2 train` passes on (--distributed-optimizer, --grad-comm-dtype, --overlap-grad-reduce).
struct GradientSettings {
  bool distributed_optimizer = false;  // AdamW's moments sharded over each layer's replicas (memory)
  int comm_bytes = 4;                  // bytes per gradient element on the wire: 4 (f32), 2 (bf16, f16)
  bool overlap = true;                 // sums run while the step's last backward pass runs
};

// A link a transfer crosses.
struct Link {
  double bandwidth_gbps = 0;
  double latency_us = 0;
  bool host_staged = false;   // cross-vendor without device-direct RDMA: two extra host copies
  double host_link_gbps = 0;  // the slower device's host link, for staging
};

class CostModel {
 public:
  CostModel(const Cluster& cluster, const Model& model, GradientSettings gradients = {});
  const GradientSettings& gradients() const { return gradients_; }
  bool distributed_optimizer() const { return gradients_.distributed_optimizer; }

  const Cluster& cluster() const { return cluster_; }
  const Model& model() const { return model_; }

  // ---- Compute ----
  double layer_parameters() const { return layer_parameters_; }  // one transformer layer
  // The token embedding (first stage); the LM head is as large (last stage).
  double embedding_parameters() const { return embedding_parameters_; }
  double layer_forward_flops(int micro_batch) const;
  double head_forward_flops(int micro_batch) const;  // the logits GEMM
  // FLOPs of one whole training step (forward + backward, no recomputation): for MFU.
  double step_flops() const;
  StageTime stage_time(const StageSpec& stage, int micro_batch) const;
  // Once per step after the gradients are averaged: zeroing, norm and AdamW over the stage's
  // parameters (0 where the device type has no measured profile for the model).
  double optimizer_time(const StageSpec& stage) const;
  double stage_parameters(const StageSpec& stage) const;  // all of them, before tensor parallelism
  // What one device of the stage holds, as HeteroPP cuts it: the blocks' share (1 / tp) plus the
  // embedding and the head whole (every tensor-parallel rank has them; no vocabulary parallelism).
  double device_parameters(const StageSpec& stage) const;
  // The device type's measured profile for this model, or nullptr.
  const MeasuredProfile* measured(const DeviceType& type) const;
  // Seconds for `micro_batch` from the measured points of tensor-parallel degree `tp` (interpolated
  // between sizes, scaled beyond them); zero where none has that degree. Beyond the largest size
  // measured at a degree d > 1, where degree-1 points exist: that size's time plus what the degree-1
  // points add from it to `micro_batch`, cut d ways. What tensor parallelism costs a small layer at
  // one size (launches, synchronisation) then stays per micro-batch, and only the work grows.
  // Scaled from one size n to b, a pass takes its fixed part F (`fixed_share` of the degree's
  // smallest measured size, MeasuredProfile::fixed_share) plus (t_n - F) b / n.
  static StageTime measured_time(const std::vector<MeasuredTime>& points, int micro_batch, int tp = 1,
                                 double fixed_share = 0);
  // `fixed_share` of the pass at the smallest size measured at degree `tp`, in seconds: the part that
  // tensor parallelism does not cut.
  static StageTime fixed_time(const std::vector<MeasuredTime>& points, double fixed_share, int tp = 1);
  // Whether any point was measured at tensor-parallel degree `tp`.
  static bool measured_at(const std::vector<MeasuredTime>& points, int tp);

  // ---- Memory (bytes per device of the stage) ----
  double parameter_state_bytes(const StageSpec& stage) const;  // weights, gradients, AdamW state
  double activation_bytes_per_layer(const StageSpec& stage, int micro_batch) const;
  // `in_flight`: micro-batches whose activations the stage holds at once (min(m, p - k) under 1F1B).
  double stage_memory(const StageSpec& stage, int micro_batch, int in_flight) const;
  double device_capacity(const StageSpec& stage) const;  // memory minus the runtime overhead

  // ---- Communication ----
  double transfer_time(const Link& link, double bytes) const;
  // Ring allreduce of `bytes` among `participants` over `link` (2 (n - 1) / n of the bytes each way).
  double allreduce_time(const Link& link, double bytes, int participants) const;
  // Activations (or their gradients) crossing from one stage to the next, per micro-batch.
  double boundary_bytes(int micro_batch) const;
  // The link a pipeline hop from stage a to stage b crosses: the node's fabric when both are in one
  // node, else the NICs of both ends (the slower, and the inter-cluster link between sub-clusters),
  // each node's shared by the devices that cross at this hop at once: `senders` on a's node,
  // `receivers` on b's. An inter-cluster link is one link between two sites, shared by every device
  // of the class that crosses it at this hop (a.replicas x a.tp), not a link per device.
  Link link_between(const StageSpec& a, const StageSpec& b, bool same_node, int senders, int receivers) const;
  // Which of the description's device-direct facts a transfer goes by (Cluster::device_direct_rdma
  // and device_direct_collectives).
  enum class Traffic { point_to_point, collective };
  // A node's NICs when `concurrent` of its devices send through them at once: each gets its share
  // of the node's NICs, at most one NIC, at the NIC type's achieved fraction of its nominal bandwidth;
  // staged through host memory unless the description says `traffic` goes device-direct.
  Link nic_link(const NodeGroup& nodes, int concurrent, Traffic traffic) const;
  Link intra_node_link(const NodeGroup& nodes) const;

 private:
  // What the estimates ask of a node group's device type and NIC, found once per group of the
  // cluster instead of by name in every estimate (the lookups were a tenth of a large search).
  struct GroupFacts {
    const DeviceType* type = nullptr;
    const NicType* nic = nullptr;
    const MeasuredProfile* profile = nullptr;  // for this model, if measured
    double peak_flops = 0;                     // in the model's dtype
    bool point_to_point_direct = false;        // the type's vendor with itself
    bool collectives_direct = false;           // the same, for its collectives
  };
  GroupFacts facts_of(const NodeGroup& nodes) const;  // cached for the cluster's own groups

  const Cluster& cluster_;
  const Model& model_;
  GradientSettings gradients_;
  double layer_parameters_, embedding_parameters_;  // the model's, asked for in every estimate
  std::vector<GroupFacts> group_facts_;             // per cluster_.nodes[g]
};

}  // namespace h2::heteroauto
