#include "baselines.hpp"

#include "h2/heteroauto/partition.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace h2::bench {

namespace {

using namespace heteroauto;

// Layer counts for the stages of one pipeline, given each stage's share.
using LayerSplit = std::function<std::vector<int>(const std::vector<StageSpec>& stages)>;

std::vector<int> even_layers(int layers, int p) {
  std::vector<int> n(p, layers / p);
  for (int k = p - (layers % p); k < p; ++k) ++n[k];  // the remainder to the last stages (Sailor)
  return n;
}

// Largest-remainder rounding of `layers` in proportion to `weights`, every stage at least one.
std::vector<int> proportional_layers(int layers, const std::vector<double>& weights) {
  const int p = static_cast<int>(weights.size());
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int> n(p, 1);
  std::vector<double> remainder(p);
  int given = p;
  for (int k = 0; k < p; ++k) {
    const double exact = (layers - p) * weights[k] / total;
    n[k] += static_cast<int>(std::floor(exact));
    remainder[k] = exact - std::floor(exact);
    given += static_cast<int>(std::floor(exact));
  }
  std::vector<int> order(p);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return remainder[a] > remainder[b]; });
  for (int i = 0; given < layers; ++i, ++given) ++n[order[i % p]];
  return n;
}

// Sets each stage's layers and the fastest recomputation that fits; false when a stage does not fit.
bool assign(const Evaluator& evaluator, std::vector<StageSpec>& stages, const std::vector<int>& layers, int micro_batch,
            int micro_batches) {
  const int p = static_cast<int>(stages.size());
  for (int k = 0; k < p; ++k) {
    stages[k].layers = layers[k];
    if (!choose_recompute(evaluator.cost(), stages[k], micro_batch, std::min(micro_batches, p - k))) return false;
  }
  return true;
}

// Whether `layers` layers fit the stage's devices with some recomputation option.
bool holds(const Evaluator& evaluator, StageSpec stage, int layers, int micro_batch, int in_flight) {
  stage.layers = layers;
  return choose_recompute(evaluator.cost(), stage, micro_batch, in_flight);
}

// The best plan with one class of identical replicas over `order` (all of each group's devices
// split evenly), for every replica count and micro-batch size, each group's TP from `tps_for`.
std::optional<Plan> best_uniform(const Evaluator& evaluator, const std::vector<int>& order,
                                 const std::function<std::vector<std::vector<int>>(int r)>& tps_for,
                                 const LayerSplit& split, bool memory_repair = false) {
  const Cluster& groups = evaluator.cluster();
  const Model& model = evaluator.cost().model();
  struct Candidate {
    std::vector<PartitionedClass> classes;
    std::vector<MicroBatchSplit> split;
    int micro_batch;
    double estimate;
  };
  std::vector<Candidate> candidates;
  for (int b : model.micro_batch_sizes) {
    if (model.global_batch % b != 0) continue;
    const int micro_batches = static_cast<int>(model.global_batch / b);
    for (int r : replica_options(groups, order, micro_batches)) {
      for (const std::vector<int>& tps : tps_for(r)) {
        const ClassLayout layout = even_class_layout(groups, order, tps, r);
        const int p = layout.stage_count();
        if (p > model.layers) continue;
        std::vector<StageSpec> stages = evaluator.stage_specs(layout);
        std::vector<int> layers = split(stages);
        const int per_replica = (micro_batches + r - 1) / r;
        bool fits = assign(evaluator, stages, layers, b, per_replica);
        // Metis's memory repair: move a layer from a stage that cannot hold its layers to the
        // neighbour holding fewer.
        for (int attempt = 0; memory_repair && !fits && attempt < model.layers * p; ++attempt) {
          int full = 0;
          while (full < p && holds(evaluator, stages[full], layers[full], b, std::min(per_replica, p - full))) ++full;
          if (full == p || layers[full] <= 1) break;
          const bool right = full + 1 < p && (full == 0 || layers[full + 1] <= layers[full - 1]);
          --layers[full];
          ++layers[right ? full + 1 : full - 1];
          fits = assign(evaluator, stages, layers, b, per_replica);
        }
        if (!fits) continue;
        Candidate c{{{layout, stages}}, {{micro_batches / r, micro_batches % r}}, b, 0};
        const PipelineTimes times = evaluator.pipeline_times(c.classes[0], b);
        c.estimate =
            evaluator.estimate_pipeline(times, c.split[0].most()) + evaluator.after_pipeline_time(c.classes, {times});
        candidates.push_back(std::move(c));
      }
    }
  }
  // Simulate the best estimates only (the closed form ranks thousands of candidates cheaply).
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
  std::optional<Plan> best;
  for (size_t i = 0; i < std::min<size_t>(candidates.size(), 16); ++i) {
    Plan plan = evaluator.build_plan(candidates[i].classes, candidates[i].split, candidates[i].micro_batch);
    if (!best || plan.prediction.step_time_s < best->prediction.step_time_s) best = std::move(plan);
  }
  return best;
}

std::vector<int> all_groups(const Evaluator& evaluator) {
  std::vector<int> order(evaluator.cluster().nodes.size());
  std::iota(order.begin(), order.end(), 0);
  return order;
}

// One TP degree for every group (Megatron's uniform configuration).
std::function<std::vector<std::vector<int>>(int)> uniform_tp(const Evaluator& evaluator,
                                                             const std::vector<int>& order) {
  return [&evaluator, order](int r) {
    std::vector<std::vector<int>> uniform;
    for (auto& tps : tensor_parallel_combinations(evaluator.cluster(), evaluator.cost().model(), order, r))
      if (std::adjacent_find(tps.begin(), tps.end(), std::not_equal_to<>()) == tps.end()) uniform.push_back(tps);
    return uniform;
  };
}

double stage_speed(const Evaluator& evaluator, const StageSpec& stage) {
  StageSpec one = stage;
  one.layers = 1;
  one.first = one.last = false;
  const StageTime t = evaluator.cost().stage_time(one, 1);
  return 1 / (t.forward + t.backward);
}

}  // namespace

std::optional<Plan> even_baseline(const Evaluator& evaluator) {
  const std::vector<int> order = all_groups(evaluator);
  const int layers = evaluator.cost().model().layers;
  return best_uniform(evaluator, order, uniform_tp(evaluator, order), [layers](const std::vector<StageSpec>& s) {
    return even_layers(layers, static_cast<int>(s.size()));
  });
}

std::optional<Plan> homogeneous_baseline(const Evaluator& evaluator) {
  // The fastest group (by its devices' total speed) that holds the model alone; Megatron on it.
  const Cluster& groups = evaluator.cluster();
  std::vector<int> order = all_groups(evaluator);
  auto aggregate_speed = [&](int g) {
    return stage_speed(evaluator, {&groups.nodes[g], 1}) * groups.nodes[g].devices();
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return aggregate_speed(a) > aggregate_speed(b); });
  const int layers = evaluator.cost().model().layers;
  for (int g : order) {
    auto plan = best_uniform(evaluator, {g}, uniform_tp(evaluator, {g}), [layers](const std::vector<StageSpec>& s) {
      return even_layers(layers, static_cast<int>(s.size()));
    });
    if (plan) return plan;
  }
  return std::nullopt;
}

std::optional<Plan> flops_proportional_baseline(const Evaluator& evaluator) {
  const std::vector<int> order = all_groups(evaluator);
  const Cluster& groups = evaluator.cluster();
  const Model& model = evaluator.cost().model();
  return best_uniform(evaluator, order, uniform_tp(evaluator, order), [&](const std::vector<StageSpec>& stages) {
    std::vector<double> weights;
    for (const StageSpec& s : stages)
      weights.push_back(groups.device_type(s.nodes->device_type).peak_tflops.at(model.dtype) * s.tp);
    return proportional_layers(model.layers, weights);
  });
}

std::optional<Plan> metis_style_baseline(const Evaluator& evaluator) {
  const Cluster& groups = evaluator.cluster();
  const Model& model = evaluator.cost().model();
  std::vector<int> order = all_groups(evaluator);
  std::optional<Plan> best;
  do {
    // Every combination of per-group TP degrees (Metis varies the group size per stage).
    auto tps_for = [&](int r) { return tensor_parallel_combinations(groups, model, order, r); };
    auto plan = best_uniform(
        evaluator, order, tps_for,
        [&](const std::vector<StageSpec>& stages) {
          std::vector<double> weights;
          for (const StageSpec& s : stages) weights.push_back(stage_speed(evaluator, s));
          return proportional_layers(model.layers, weights);
        },
        true);
    if (plan && (!best || plan->prediction.step_time_s < best->prediction.step_time_s)) best = std::move(plan);
  } while (std::next_permutation(order.begin(), order.end()));
  return best;
}

}  // namespace h2::bench
