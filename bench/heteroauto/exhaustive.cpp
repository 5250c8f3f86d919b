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
          std::vector<std::vector<int>> tps{{}};
          for (int g : order) {
            std::vector<std::vector<int>> next;
            for (int tp : tensor_parallel_options(groups.nodes[g], model,
                                                  groups.nodes[g].count * groups.nodes[g].devices_per_node / r))
              for (auto partial : tps) {
                partial.push_back(tp);
                next.push_back(partial);
              }
            tps = std::move(next);
          }
          for (const auto& tp : tps) {
            ClassLayout layout;
            layout.replicas = r;
            for (size_t i = 0; i < order.size(); ++i) {
              const int devices = groups.nodes[order[i]].count * groups.nodes[order[i]].devices_per_node / r;
              layout.segments.push_back({order[i], tp[i], devices / tp[i]});
            }
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
    std::vector<int> block_of(n, -1);
    std::function<void(int, int)> assign = [&](int g, int blocks) {
      if (!result.complete) return;
      if (g == n) {
        if (blocks == 0) return;
        std::vector<std::vector<Candidate>*> choices(blocks);
        for (int k = 0; k < blocks; ++k) {
          unsigned mask = 0;
          for (int i = 0; i < n; ++i)
            if (block_of[i] == k) mask |= 1u << i;
          choices[k] = &by_block[mask];
          if (choices[k]->empty()) return;
        }
        std::vector<size_t> pick(blocks, 0);
        while (true) {
          if (++result.plans > budget) {
            result.complete = false;
            return;
          }
          std::vector<Candidate*> chosen;
          std::vector<int> replicas;
          std::vector<PartitionedClass> classes;
          for (int k = 0; k < blocks; ++k) {
            chosen.push_back(&(*choices[k])[pick[k]]);
            replicas.push_back(chosen.back()->pc.layout.replicas);
            classes.push_back(chosen.back()->pc);
          }
          auto simulated = [&](size_t c, int m) {
            auto [it, fresh] = chosen[c]->makespan.try_emplace(m, 0.0);
            if (fresh) it->second = simulate_pipeline(chosen[c]->times, m, Schedule::one_f_one_b).makespan;
            return it->second;
          };
          const auto split = Evaluator::split_micro_batches(simulated, replicas, micro_batches);
          if (!split.empty()) {
            double step = 0;
            for (int k = 0; k < blocks; ++k) step = std::max(step, simulated(k, split[k].most()));
            step += evaluator.dp_allreduce_time(classes);
            best = std::min(best, step);
          }
          int k = 0;
          while (k < blocks && ++pick[k] == choices[k]->size()) pick[k++] = 0;
          if (k == blocks) break;
        }
        return;
      }
      block_of[g] = -1;
      assign(g + 1, blocks);
      for (int k = 0; k < blocks; ++k) {
        block_of[g] = k;
        assign(g + 1, blocks);
      }
      if (blocks < max_classes) {
        block_of[g] = blocks;
        assign(g + 1, blocks + 1);
      }
    };
    assign(0, 0);
  }
  result.step_time_s = std::isfinite(best) ? best : 0;
  return result;
}

}  // namespace h2::bench
