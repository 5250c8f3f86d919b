// The coarse structure of a plan, before layers and micro-batches are chosen, and the evaluator
// that turns one into a plan under the cost model. The search (search.hpp), the baselines and the
// exhaustive reference of bench/ all go through the same evaluator, so they are compared under one
// cost model and one simulator.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/plan.hpp"
#include "h2/heteroauto/simulator.hpp"

namespace h2::heteroauto {

// The cluster with identical node groups merged (same device type, node shape, links, NIC and
// sub-cluster): the search works on counts of these, never on device ids. `members` maps each
// merged group back to the described groups, in order, with their node counts.
struct CanonicalCluster {
  Cluster cluster;
  std::vector<std::vector<std::pair<std::string, int>>> members;  // per cluster.nodes[g]
};
CanonicalCluster canonicalize(const Cluster& cluster);

// Tensor-parallel degrees a group's `devices` (per replica) may use: powers of two inside one node
// that divide the heads, KV heads (or are multiples of them) and the FFN width.
std::vector<int> tensor_parallel_options(const NodeGroup& group, const Model& model, int devices);
// Replica counts for a class over `block` (indices into groups.nodes): at most the smallest group
// and the micro-batch count, dividing one group's device count or the micro-batch count.
std::vector<int> replica_options(const Cluster& groups, const std::vector<int>& block, int micro_batches);

// Calls `each` with every pick of one index per position (`sizes[i]` choices at position i; no
// call when a size is 0) until it returns false.
void for_each_pick(const std::vector<size_t>& sizes, const std::function<bool(const std::vector<size_t>&)>& each);

// Every set partition of a non-empty subset of `groups` groups into at most `max_classes` blocks,
// each block given as a mask (bit g: group g), until `each` returns false.
void for_each_class_partition(int groups, int max_classes,
                              const std::function<bool(const std::vector<unsigned>&)>& each);

// Consecutive stages of one pipeline on one (canonical) node group, all with the same TP degree.
struct Segment {
  int group = 0;
  int tp = 1;
  int stages = 1;
  int devices() const { return tp * stages; }
};

// A pipeline class: `replicas` identical pipelines, each on its own devices.
struct ClassLayout {
  std::vector<Segment> segments;  // in pipeline order
  int replicas = 1;
  int stage_count() const;
};

// Every choice of one TP degree per group of `order`, each group's devices split evenly over
// `replicas` (tensor_parallel_options per group); empty when a group has no option.
std::vector<std::vector<int>> tensor_parallel_combinations(const Cluster& groups, const Model& model,
                                                           const std::vector<int>& order, int replicas);
// The class over `order` with each group's devices split evenly over the replicas, at `tps`.
ClassLayout even_class_layout(const Cluster& groups, const std::vector<int>& order, const std::vector<int>& tps,
                              int replicas);

// A class with its layer partition chosen (stages[k].layers / recompute filled in).
struct PartitionedClass {
  ClassLayout layout;
  std::vector<StageSpec> stages;
};

// Micro-batches of a class's replicas: `extra` replicas run `base + 1`, the others `base`.
struct MicroBatchSplit {
  int base = 1;
  int extra = 0;
  int most() const { return extra > 0 ? base + 1 : base; }
};

class Evaluator {
 public:
  Evaluator(const CanonicalCluster& canonical, const Model& model, Schedule schedule = Schedule::one_f_one_b,
            bool distributed_optimizer = false);

  const CostModel& cost() const { return cost_; }
  const Cluster& cluster() const { return canonical_.cluster; }

  // The stages of one pipeline of the class, with nodes, tp, first and last set (layers 0).
  std::vector<StageSpec> stage_specs(const ClassLayout& layout) const;
  // Per-micro-batch stage and transfer times of one pipeline of a partitioned class.
  PipelineTimes pipeline_times(const PartitionedClass& c, int micro_batch) const;
  // Closed-form 1F1B estimate: one micro-batch's way through and back, then (m - 1) periods of the
  // slowest stage or of the slowest round trip over the micro-batches 1F1B keeps in flight.
  double estimate_pipeline(const PipelineTimes& times, int micro_batches) const;
  // Gradient averaging after the step: per stage a ring allreduce over every replica holding its
  // layers (slowest link among them, fp32 gradients of the largest shard); the slowest stage's ring.
  double dp_allreduce_time(const std::vector<PartitionedClass>& classes) const;
  // The slowest stage's optimizer step, after the allreduce (zero without measured profiles).
  double optimizer_time(const std::vector<PartitionedClass>& classes) const;
  // Everything after the last backward: the allreduce, then the optimizer.
  double after_pipeline_time(const std::vector<PartitionedClass>& classes) const {
    return dp_allreduce_time(classes) + optimizer_time(classes);
  }
  // A bound no partition of the class (alone) beats: some stage holds at least ceil(L / p) layers.
  double dp_allreduce_lower_bound(const ClassLayout& layout) const;
  // Sum of one pipeline's stage-to-stage transfer times (one direction), without a partition.
  double transfer_sum(const ClassLayout& layout, int micro_batch) const;
  // Splits `micro_batches` over the classes' replicas so that the slowest finishes first (greedy
  // water-filling on the closed-form estimate; exact for non-decreasing times). Every replica gets
  // at least one; returns an empty vector when there are more replicas than micro-batches.
  std::vector<MicroBatchSplit> split_micro_batches(const std::vector<PipelineTimes>& times,
                                                   const std::vector<int>& replicas, int micro_batches) const;
  // The same water-filling on any non-decreasing time of (class, micro-batches), e.g. simulated.
  static std::vector<MicroBatchSplit> split_micro_batches(const std::function<double(size_t, int)>& time,
                                                          const std::vector<int>& replicas, int micro_batches);
  // The full plan: devices assigned, every distinct pipeline simulated, prediction filled in.
  Plan build_plan(const std::vector<PartitionedClass>& classes, const std::vector<MicroBatchSplit>& split,
                  int micro_batch) const;

 private:
  bool segment_in_one_node(const Segment& s) const;
  bool replicas_in_one_node(const Segment& s, int replicas) const;
  // The link a ring over devices of these groups crosses: the node's fabric when it stays in one
  // node, else the slowest NIC, host staging and inter-cluster link among them.
  Link ring_link(const std::vector<int>& groups, bool in_one_node) const;

  const CanonicalCluster& canonical_;
  CostModel cost_;
  Schedule schedule_;
};

}  // namespace h2::heteroauto
