// The coarse structure of a plan, before layers and micro-batches are chosen, and the evaluator
// that turns one into a plan under the cost model. The search (search.hpp), the baselines and the
// exhaustive reference of bench/ all go through the same evaluator, so they are compared under one
// cost model and one simulator.
#pragma once

#include <array>
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
  // How a group's devices are dealt out: replica by replica (HeteroAuto's plans: a replica's stages
  // on neighbouring devices), or stage by stage (Megatron's and DeepSpeed's rank order, rank = tp +
  // TP x dp + TP x DP x pp: a stage's replicas on neighbouring devices), to predict runs placed so.
  bool stage_major = false;
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
// How many ranks hold each layer in a plan of these classes: every class's replicas (each class's
// pipeline holds every layer). The distributed optimizer shards a layer over them (StageSpec::holders).
int layer_holders(const std::vector<PartitionedClass>& classes);

// The closed-form 1F1B estimate of one pipeline: its first micro-batch's way through and back, then one
// period per further micro-batch.
struct PipelineEstimate {
  double fill = 0, period = 0;
  double at(int micro_batches) const { return fill + (micro_batches - 1) * period; }
};

// How a runtime moves activations between pipeline stages. HeteroPP: every tensor-parallel rank
// sends the whole activation and computes on while it travels. DeepSpeed's pipeline engine (which
// published runs used): its sends block, and with tensor parallelism each rank sends 1/tp of the
// activation (is_pipe_partitioned), the receivers gathering it inside their node.
enum class PipelineRuntime { heteropp, deepspeed };

// Micro-batches of a class's replicas: `extra` replicas run `base + 1`, the others `base`.
struct MicroBatchSplit {
  int base = 1;
  int extra = 0;
  int most() const { return extra > 0 ? base + 1 : base; }
};

class Evaluator {
 public:
  // `runtime`: whose pipeline engine the plan runs on (PipelineRuntime), to predict runs of others.
  Evaluator(const CanonicalCluster& canonical, const Model& model, Schedule schedule = Schedule::one_f_one_b,
            GradientSettings gradients = {}, PipelineRuntime runtime = PipelineRuntime::heteropp);

  const CostModel& cost() const { return cost_; }
  const Cluster& cluster() const { return canonical_.cluster; }

  // The stages of one pipeline of the class, with nodes, tp, first and last set (layers 0).
  std::vector<StageSpec> stage_specs(const ClassLayout& layout) const;
  // Per-micro-batch stage and transfer times of one pipeline of a partitioned class.
  PipelineTimes pipeline_times(const PartitionedClass& c, int micro_batch) const;
  // Closed-form 1F1B estimate: one micro-batch's way through and back, then (m - 1) periods of the
  // slowest stage or of the slowest round trip over the micro-batches 1F1B keeps in flight.
  double estimate_pipeline(const PipelineTimes& times, int micro_batches) const;
  PipelineEstimate pipeline_estimate(const PipelineTimes& times) const;
  // Gradient averaging, per class and stage (classes[c].stages[k]): an allreduce over every replica
  // holding the stage's layers (the largest shard, in the gradient settings' comm dtype), hierarchical
  // where replicas share nodes: inside each node, then across nodes over the slowest NIC among them.
  // `bytes_per_value`: 0 for the gradient settings' comm dtype.
  std::vector<std::vector<double>> dp_allreduce_times(const std::vector<PartitionedClass>& classes,
                                                      int bytes_per_value = 0) const;
  // What the gradients' sums take per class and stage: those allreduces, or with the distributed
  // optimizer the reduce-scatters that replace them (half an allreduce's traffic each way).
  std::vector<std::vector<double>> gradient_sum_times(const std::vector<PartitionedClass>& classes) const;
  // The slowest of them.
  double dp_allreduce_time(const std::vector<PartitionedClass>& classes) const;
  // With the distributed optimizer: each stage's replicas gather their updated weights back whole
  // after the optimizer step (ShardedAdamW), half an allreduce of values of the model's dtype (a
  // 16-bit model's holders round their slices first), which nothing hides; the slowest stage's. 0
  // without it.
  double weight_gather_time(const std::vector<PartitionedClass>& classes) const;
  // The same, given gradient_sum_times (the gather's allreduces are the sums' where both move values
  // of one size).
  double weight_gather_time(const std::vector<PartitionedClass>& classes,
                            const std::vector<std::vector<double>>& sums) const;
  // What of the gradient sums the pipeline does not hide, after its end: stage k's sum starts when
  // its last backward pass does when sums overlap it (then its last layer's share stays exposed),
  // else when the pass ends, which for k > 0 is earlier than the pipeline's end by the backward
  // passes and transfers of the stages before it. `times`: per class, its pipeline's times.
  double exposed_allreduce_time(const std::vector<PartitionedClass>& classes,
                                const std::vector<PipelineTimes>& times) const;
  // The same for given gradient_sum_times.
  double exposed_allreduce_time(const std::vector<PartitionedClass>& classes, const std::vector<PipelineTimes>& times,
                                const std::vector<std::vector<double>>& sums) const;
  // The slowest stage's optimizer step, after the allreduce (zero without measured profiles).
  double optimizer_time(const std::vector<PartitionedClass>& classes) const;
  // Everything after the last backward: the exposed sums, the optimizer, then the weights' gather.
  // The search's costliest estimate: the data-parallel allreduces are worked out once.
  double after_pipeline_time(const std::vector<PartitionedClass>& classes,
                             const std::vector<PipelineTimes>& times) const;
  // A bound no partition of the class (alone) beats: some stage holds at least ceil(L / p) layers.
  double dp_allreduce_lower_bound(const ClassLayout& layout) const;
  // Sum of one pipeline's stage-to-stage transfer times (one direction), without a partition.
  double transfer_sum(const ClassLayout& layout, int micro_batch) const;

  // How a pipeline hop leaves its devices as the layout places them (build_plan deals replica r's
  // share of a group out as its devices [r x D, (r + 1) x D), D the segment's devices): whether it
  // stays in one node for every replica, and else how many devices of the sending and of the
  // receiving node cross at this hop at once (the tensor-parallel ranks of every replica whose hop
  // leaves that node).
  struct Hop {
    bool same_node = true;
    int senders = 0, receivers = 0;
  };
  // From stage k of segment `segment` to the next stage (in the segment, or the next segment's first).
  Hop hop(const ClassLayout& layout, size_t segment, int k) const;
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

  // Each class's replicas simulated: those with split.base micro-batches and those with one more
  // (`more` is `base` where no replica has one more).
  struct ClassSimulations {
    Simulation base, more;
  };
  // What a step's prediction is made of, per class: its pipeline's times and simulations.
  struct StepParts {
    std::vector<PipelineTimes> times;
    std::vector<ClassSimulations> sims;
  };
  StepParts step_parts(const std::vector<PartitionedClass>& classes, const std::vector<MicroBatchSplit>& split,
                       int micro_batch) const;
  // The parts after only class `ci` changed: that class timed and simulated again, the others kept
  // (all simulated again where stages share the host, since they slow each other).
  void update_step_parts(StepParts& parts, const std::vector<PartitionedClass>& classes,
                         const std::vector<MicroBatchSplit>& split, int micro_batch, size_t ci) const;
  // build_plan's prediction.step_time_s from the parts, without building the plan: for a search
  // that compares many.
  double step_time(const std::vector<PartitionedClass>& classes, const StepParts& parts) const;

  // The devices of the classes on the cluster's shared host, and the cores they ask of it over the
  // cores it has (0 without a shared host or none of its devices).
  int shared_host_devices(const std::vector<PartitionedClass>& classes) const;
  double shared_host_load(const std::vector<PartitionedClass>& classes) const;

  // Replicas of a class whose devices of one stage of the segment share one node.
  int replicas_per_node(const ClassLayout& layout, size_t segment) const;
  // How far apart consecutive replicas' devices of a segment lie in its group, and the first device of
  // replica r's stage k of it (an index into the group), as the layout deals them out.
  static int64_t replica_stride(const ClassLayout& layout, size_t segment);
  static int64_t first_device(const ClassLayout& layout, size_t segment, int64_t replica, int stage);

 private:
  // The link an allreduce among nodes of these groups (bit g: group g) crosses, with every device of a
  // node sending at once: the slowest NIC share, host staging and inter-cluster link among them, an
  // inter-cluster link shared by the `rings` that cross it at once.
  Link ring_link(unsigned groups, int rings) const;
  // Per group (at most 16): how many replicas of a stage's ring it holds, and how many of them share a node.
  struct RingMember {
    int replicas = 0, local = 1;
  };
  using RingMembers = std::array<RingMember, 16>;
  // An allreduce of `bytes` per device over the replicas of `groups` (bit g: group g): inside each
  // group (a ring among each node's replicas and one across its nodes on 1 / local of the bytes, all
  // groups at once), then across the groups on a group's shard over the slowest link among them; or
  // one flat ring over them all where that is faster. `tp`: the tensor-parallel indices whose rings
  // run at once (each on its own shard), all of which cross an inter-cluster link together.
  double hierarchical_allreduce(unsigned groups, const RingMembers& members, double bytes, int tp) const;

  // ClassSimulations of every class: with simulate_step, or simulate_shared where stages compute on
  // the shared host.
  std::vector<ClassSimulations> simulate_classes(const std::vector<PartitionedClass>& classes,
                                                 const std::vector<PipelineTimes>& times,
                                                 const std::vector<MicroBatchSplit>& split) const;

  const CanonicalCluster& canonical_;
  CostModel cost_;
  Schedule schedule_;
  PipelineRuntime runtime_ = PipelineRuntime::heteropp;
  // Found once per group, for the rings' links: its NIC share with every device sending, and per pair
  // of groups whether a collective's transfers between their devices go device-direct
  // (Cluster::collectives_direct) and the link between their sub-clusters.
  struct Between {
    bool device_direct = true;
    const InterClusterLink* inter_cluster = nullptr;  // null: one sub-cluster
  };
  std::vector<Link> nic_all_at_once_;
  std::vector<double> nic_one_;     // what one of a node's NICs achieves (Gbit/s)
  std::vector<bool> nic_ethernet_;  // whether a group's NIC is plain Ethernet (always staged)
  std::vector<std::vector<Between>> between_;
};

}  // namespace h2::heteroauto
