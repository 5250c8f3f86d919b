#include "h2/heteroauto/partition.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace h2::heteroauto {

namespace {

struct Choice {
  double time = std::numeric_limits<double>::infinity();
  Recompute recompute = Recompute::none;
  bool fits = false;
};

// The fastest recomputation option under which `n` layers fit on the stage.
Choice best_choice(const CostModel& cost, StageSpec stage, int n, int micro_batch, int in_flight) {
  Choice best;
  stage.layers = n;
  for (Recompute r : cost.model().recompute) {
    stage.recompute = r;
    if (cost.stage_memory(stage, micro_batch, in_flight) > cost.device_capacity(stage)) continue;
    const StageTime t = cost.stage_time(stage, micro_batch);
    if (t.forward + t.backward < best.time) best = {t.forward + t.backward, r, true};
  }
  return best;
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", bytes / kGiB);
  return text;
}

}  // namespace

Partition partition_layers(const CostModel& cost, std::vector<StageSpec> stages, int micro_batch, int m) {
  Partition result;
  const int p = static_cast<int>(stages.size());
  const int layers = cost.model().layers;
  if (p > layers) {
    result.binding =
        std::to_string(p) + " stages need at least as many layers; the model has " + std::to_string(layers);
    return result;
  }
  const int most = layers - (p - 1);  // every other stage keeps at least one layer
  // choices[k][n - 1]: stage k with n layers.
  std::vector<std::vector<Choice>> choices(p);
  std::vector<double> candidates;
  for (int k = 0; k < p; ++k) {
    const int in_flight = std::min(m, p - k);
    for (int n = 1; n <= most; ++n) {
      const Choice c = best_choice(cost, stages[k], n, micro_batch, in_flight);
      if (!c.fits) break;  // memory only grows with n
      choices[k].push_back(c);
      candidates.push_back(c.time);
    }
    if (choices[k].empty()) {
      StageSpec one = stages[k];
      one.layers = 1;
      one.recompute = cost.model().recompute.back();
      result.binding = "memory: stage " + std::to_string(k) + " (" + stages[k].nodes->device_type + ", tp " +
                       std::to_string(stages[k].tp) + ") cannot hold one layer with micro-batch " +
                       std::to_string(micro_batch) + ": it needs " +
                       gib(cost.stage_memory(one, micro_batch, in_flight)) + " of " + gib(cost.device_capacity(one)) +
                       " per device";
      return result;
    }
  }
  // The largest layer count of stage k whose time is within t (times grow with n).
  auto capacity = [&](int k, double t) {
    int n = 0;
    while (n < static_cast<int>(choices[k].size()) && choices[k][n].time <= t) ++n;
    return n;
  };
  auto feasible = [&](double t) {
    int total = 0;
    for (int k = 0; k < p; ++k) {
      const int c = capacity(k, t);
      if (c == 0) return false;
      total += c;
    }
    return total >= layers;
  };
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  if (!feasible(candidates.back())) {
    int total = 0;
    for (int k = 0; k < p; ++k) total += static_cast<int>(choices[k].size());
    result.binding = "memory: the " + std::to_string(p) + " stages hold at most " + std::to_string(total) +
                     " of the model's " + std::to_string(layers) + " layers with micro-batch " +
                     std::to_string(micro_batch);
    return result;
  }
  size_t low = 0, high = candidates.size() - 1;  // candidates[high] is feasible
  while (low < high) {
    const size_t mid = (low + high) / 2;
    if (feasible(candidates[mid]))
      high = mid;
    else
      low = mid + 1;
  }
  const double bottleneck = candidates[high];
  std::vector<int> n(p);
  int total = 0;
  for (int k = 0; k < p; ++k) total += n[k] = capacity(k, bottleneck);
  // Give back the excess from the slowest stages first, which keeps the stages balanced.
  while (total > layers) {
    int slowest = -1;
    for (int k = 0; k < p; ++k)
      if (n[k] > 1 && (slowest < 0 || choices[k][n[k] - 1].time > choices[slowest][n[slowest] - 1].time)) slowest = k;
    --n[slowest];
    --total;
  }
  result.feasible = true;
  for (int k = 0; k < p; ++k) {
    stages[k].layers = n[k];
    stages[k].recompute = choices[k][n[k] - 1].recompute;
    result.bottleneck = std::max(result.bottleneck, choices[k][n[k] - 1].time);
  }
  result.stages = std::move(stages);
  return result;
}

}  // namespace h2::heteroauto
