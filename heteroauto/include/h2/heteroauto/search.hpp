// HeteroAuto's search: the best plans for a model on a cluster under the cost model.
//
// Coarse, over counts of (canonical) node groups, never device ids:
//  - which groups form a pipeline class (a set partition of the groups used; one class is a
//    pipeline whose stages span several device types, several classes are asymmetric data
//    parallelism: replicas of different kinds with different micro-batch counts),
//  - the order of the groups along the pipeline, each group's tensor-parallel degree (inside a
//    node) and the class's replica count, which splits each group evenly over the replicas,
//  - the micro-batch size.
// A class's data-parallel rings then run over its own groups only: a class confined to one NIC
// class keeps its gradient traffic there and only pipeline p2p crosses slower links (Holmes).
// Fine, per class: the exact bottleneck layer partition under each device's memory with
// recomputation per stage (partition.hpp). Classes are pruned with a lower bound that needs no
// partition (the layers spread continuously over the stages' speeds). Micro-batches are
// water-filled over the replicas (never zero). The best estimates are re-ranked with the 1F1B
// event simulator, and the best few have their layer split refined on simulated step time. All of
// it runs once without the distributed optimizer and once with it, unless the options fix which.
#pragma once

#include <string>
#include <vector>

#include "h2/heteroauto/calibration.hpp"
#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/plan.hpp"
#include "h2/heteroauto/simulator.hpp"

namespace h2::heteroauto {

struct SearchOptions {
  int top = 3;        // plans returned, best first
  int simulate = 24;  // best closed-form estimates re-ranked with the simulator
  int refine = 12;    // best simulated plans whose layer split is refined on the simulated step
  int per_class = 6;  // best layouts kept per set of groups, combined across classes
  // Pipeline classes in one plan; 0: as many as the cluster has device types, and at least 3, so
  // that every type can run its own kind of replica.
  int max_classes = 0;
  Schedule schedule = Schedule::one_f_one_b;
  // false: partition every layout, for checking that the bound loses nothing (among the classes that fit
  // alone; past the bound, a class is tried beside others only where the model state alone does not fit)
  bool prune = true;
  int max_tp = 0;  // > 0: no tensor-parallel degree above it
  // What HeteroPP will do with the gradients. With distributed_optimizer (--distributed-optimizer),
  // every plan shards AdamW's moments over each layer's replicas, so plans that only fit with it are
  // found (their plan says so, and h2 train turns it on).
  GradientSettings gradients;
  // Where gradients.distributed_optimizer is off: also plan with it on, and keep whichever plans are
  // faster. It trades memory (the moments sharded: deeper stages, fewer recomputed layers, more
  // replicas fit) and half the gradient traffic against gathering the updated weights after every
  // step, which nothing hides; which wins depends on the layout, so it is a per-plan choice
  // (--no-distributed-optimizer turns the choice off). The search runs once for each setting.
  bool choose_distributed_optimizer = true;
};

struct SearchStats {
  long layouts = 0;       // coarse layouts enumerated
  long pruned = 0;        // discarded by the lower bound without a partition
  long partitioned = 0;   // exact layer partitions computed
  long infeasible = 0;    // layouts that fit in memory neither alone nor beside other classes
  long combinations = 0;  // multi-class combinations water-filled
  long simulated = 0;     // plans simulated
  int groups = 0;         // canonical node groups
  int searches = 1;       // 2: the counts are of a search with the distributed optimizer and one without
  double seconds = 0;
};

struct SearchResult {
  std::vector<Plan> plans;  // best first; empty when nothing fits
  std::string infeasible;   // when no plan: the binding constraint, in words
  SearchStats stats;
  std::vector<std::string> explanation;     // the search's reasoning, one line each, for --explain
  std::vector<CalibrationFit> calibration;  // what the cluster's calibrated_from runs fitted, before the search
};

// Throws DescriptionError when the cluster cannot run the model's dtype at all.
SearchResult search_plans(const Cluster& cluster, const Model& model, const SearchOptions& options = {});

}  // namespace h2::heteroauto
