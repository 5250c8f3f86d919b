#include "exhaustive.hpp"

#include "h2/heteroauto/partition.hpp"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

namespace h2::bench {

namespace {

using namespace heteroauto;

// One class with one layer split, its simulated makespan per micro-batch count (filled lazily).
struct Candidate {
  PartitionedClass pc;
  PipelineTimes times;
  std::map<int, double> makespan;
};

// Every composition of `layers` into `p` positive parts.
void compositions(int layers, int p, std::vector<int>& parts, const std::function<void()>& each) {
  if (static_cast<int>(parts.size()) == p - 1) {
    parts.push_back(layers);
    each();
    parts.pop_back();
    return;
  }
  const int rest = p - static_cast<int>(parts.size()) - 1;
  for (int n = 1; n <= layers - rest; ++n) {
    parts.push_back(n);
    compositions(layers - n, p, parts, each);
    parts.pop_back();
  }
}

}  // namespace

ExhaustiveResult exhaustive_search(const Evaluator& evaluator, int max_classes, long budget) {
  const Cluster& groups = evaluator.cluster();
  const CostModel& cost = evaluator.cost();
  const Model& model = cost.model();
  const int n = static_cast<int>(groups.nodes.size());
  ExhaustiveResult result;
  double best = std::numeric_limits<double>::infinity();

  for (int b : model.micro_batch_sizes) {
    if (model.global_batch % b != 0) continue;
    const int micro_batches = static_cast<int>(model.global_batch / b);
    std::map<unsigned, std::vector<Candidate>> by_block;
    for (unsigned mask = 1; mask < (1u << n); ++mask) {
      std::vector<int> order;
      for (int g = 0; g < n; ++g)
        if (mask & (1u << g)) order.push_back(g);
      auto& candidates = by_block[mask];
      do {
        for (int r : replica_options(groups, order, micro_batches)) {
          for (const auto& tps : tensor_parallel_combinations(groups, model, order, r)) {
            const ClassLayout layout = even_class_layout(groups, order, tps, r);
            const int p = layout.stage_count();
            if (p > model.layers) continue;
            const int in_flight = (micro_batches + r - 1) / r;  // the planner's memory rule
            std::vector<int> parts;
            compositions(model.layers, p, parts, [&] {
              std::vector<StageSpec> stages = evaluator.stage_specs(layout);
              for (int k = 0; k < p; ++k) {
                stages[k].layers = parts[k];
                if (!choose_recompute(cost, stages[k], b, std::min(in_flight, p - k))) return;
              }
              Candidate c{{layout, stages}, {}, {}};
              c.times = evaluator.pipeline_times(c.pc, b);
              candidates.push_back(std::move(c));
            });
          }
        }
      } while (std::next_permutation(order.begin(), order.end()));
    }

    // Every set partition of (a subset of) the groups into at most max_classes blocks, and every
    // choice of one candidate per block.
    for_each_class_partition(n, max_classes, [&](const std::vector<unsigned>& masks) {
      std::vector<std::vector<Candidate>*> choices;
      std::vector<size_t> sizes;
      for (unsigned mask : masks) {
        choices.push_back(&by_block[mask]);
        sizes.push_back(choices.back()->size());
      }
      for_each_pick(sizes, [&](const std::vector<size_t>& pick) {
        if (++result.plans > budget) {
          result.complete = false;
          return false;
        }
        std::vector<Candidate*> chosen;
        std::vector<int> replicas;
        std::vector<PartitionedClass> classes;
        std::vector<PipelineTimes> times;
        for (size_t k = 0; k < choices.size(); ++k) {
          chosen.push_back(&(*choices[k])[pick[k]]);
          replicas.push_back(chosen.back()->pc.layout.replicas);
          classes.push_back(chosen.back()->pc);
          times.push_back(chosen.back()->times);
        }
        auto simulated = [&](size_t c, int m) {
          auto [it, fresh] = chosen[c]->makespan.try_emplace(m, 0.0);
          if (fresh) it->second = simulate_pipeline(chosen[c]->times, m, Schedule::one_f_one_b).makespan;
          return it->second;
        };
        const auto split = Evaluator::split_micro_batches(simulated, replicas, micro_batches);
        if (!split.empty()) {
          double step = 0;
          for (size_t k = 0; k < chosen.size(); ++k) step = std::max(step, simulated(k, split[k].most()));
          step += evaluator.after_pipeline_time(classes, times);
          best = std::min(best, step);
        }
        return true;
      });
      return result.complete;
    });
  }
  result.step_time_s = std::isfinite(best) ? best : 0;
  return result;
}

}  // namespace h2::bench
