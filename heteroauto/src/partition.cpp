#include "h2/heteroauto/partition.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

namespace h2::heteroauto {

namespace {

// A stage's time and memory are affine in its layer count (each layer costs the same; the
// embedding, head and recomputation buffer are fixed), so two evaluations give them exactly and
// the largest layer count under a time or memory limit is a division, not a scan.
struct Affine {
  double per_layer = 0, fixed = 0;
  double at(int n) const { return per_layer * n + fixed; }
  // The largest n >= 0 with at(n) <= limit (relative slack absorbs rounding), capped at `most`.
  int largest_within(double limit, int most) const {
    if (at(1) > limit * (1 + 1e-12)) return 0;
    if (per_layer <= 0) return most;
    const double n = std::floor((limit * (1 + 1e-12) - fixed) / per_layer);
    return static_cast<int>(std::min<double>(most, n));
  }
};

struct Option {
  Recompute recompute;
  Affine time, memory;
  int fits = 0;  // most layers that fit in memory with this option
};

}  // namespace

bool choose_recompute(const CostModel& cost, StageSpec& stage, int micro_batch, int in_flight) {
  double fastest = std::numeric_limits<double>::infinity();
  Recompute best = stage.recompute;
  for (Recompute r : cost.model().recompute) {
    StageSpec s = stage;
    s.recompute = r;
    if (cost.stage_memory(s, micro_batch, in_flight) > cost.device_capacity(s)) continue;
    const StageTime t = cost.stage_time(s, micro_batch);
    if (t.forward + t.backward < fastest) fastest = t.forward + t.backward, best = r;
  }
  if (!std::isfinite(fastest)) return false;
  stage.recompute = best;
  return true;
}

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
  // options[k]: stage k's recomputation choices, fastest first.
  std::vector<std::vector<Option>> options(p);
  // Each stage's forward + backward at 1 and 2 layers, per recomputation choice (in the model's order).
  std::vector<std::vector<std::array<double, 2>>> times(p);
  int holdable = 0;
  // A stage's times are those of the stage before it on the same devices (a segment's middle
  // stages): taken over rather than worked out again.
  const auto same_times = [&](int k) {
    if (k == 0) return false;
    const StageSpec &a = stages[k - 1], &b = stages[k];
    return a.nodes == b.nodes && a.tp == b.tp && !a.first && !a.last && !b.first && !b.last;
  };
  for (int k = 0; k < p; ++k) {
    const int in_flight = std::min(m, p - k);
    const double capacity = cost.device_capacity(stages[k]);
    int best_fit = 0;
    for (size_t i = 0; i < cost.model().recompute.size(); ++i) {
      const Recompute r = cost.model().recompute[i];
      StageSpec s = stages[k];
      s.recompute = r;
      double time[2], memory[2];
      for (int n = 1; n <= 2; ++n) {
        s.layers = n;
        if (same_times(k)) {
          time[n - 1] = times[k - 1][i][n - 1];
        } else {
          const StageTime t = cost.stage_time(s, micro_batch);
          time[n - 1] = t.forward + t.backward;
        }
        memory[n - 1] = cost.stage_memory(s, micro_batch, in_flight);
      }
      times[k].push_back({time[0], time[1]});
      Option o{r, {time[1] - time[0], 2 * time[0] - time[1]}, {memory[1] - memory[0], 2 * memory[0] - memory[1]}};
      o.fits = o.memory.largest_within(capacity, most);
      best_fit = std::max(best_fit, o.fits);
      options[k].push_back(o);
    }
    std::sort(options[k].begin(), options[k].end(),
              [](const Option& a, const Option& b) { return a.time.at(1) < b.time.at(1); });
    if (best_fit == 0) {
      const Option& leanest =
          *std::min_element(options[k].begin(), options[k].end(),
                            [](const Option& a, const Option& b) { return a.memory.at(1) < b.memory.at(1); });
      result.binding = "memory: stage " + std::to_string(k) + " (" + stages[k].nodes->device_type + ", tp " +
                       std::to_string(stages[k].tp) + ") cannot hold one layer with micro-batch " +
                       std::to_string(micro_batch) + ": it needs " + format_memory(leanest.memory.at(1)) + " of " +
                       format_memory(capacity) + " per device";
      return result;
    }
    holdable += best_fit;
  }
  if (holdable < layers) {
    result.binding = "memory: the " + std::to_string(p) + " stages hold at most " + std::to_string(holdable) +
                     " of the model's " + std::to_string(layers) + " layers with micro-batch " +
                     std::to_string(micro_batch);
    return result;
  }
  // The most layers stage k can run within time t: for each option, what fits both memory and time.
  auto capacity = [&](int k, double t) {
    int n = 0;
    for (const Option& o : options[k]) n = std::max(n, std::min(o.fits, o.time.largest_within(t, most)));
    return n;
  };
  auto feasible = [&](double t) {
    int total = 0;
    for (int k = 0; k < p && total < layers; ++k) {
      const int c = capacity(k, t);
      if (c == 0) return false;
      total += c;
    }
    return total >= layers;
  };
  // The smallest feasible bottleneck lies between the slowest one-layer stage and the time of the
  // most layers any stage may hold, and it is some stage's time at some layer count: bisect to a
  // thousandth, then take the smallest feasible of the stage times left between the bounds.
  double low = 0, high = 0;
  for (int k = 0; k < p; ++k) {
    double slowest_option = 0;
    for (const Option& o : options[k])
      if (o.fits > 0) slowest_option = std::max(slowest_option, o.time.at(o.fits));
    high = std::max(high, slowest_option);
    double one = std::numeric_limits<double>::infinity();
    for (const Option& o : options[k])
      if (o.fits > 0) one = std::min(one, o.time.at(1));
    low = std::max(low, one);
  }
  if (!feasible(high)) {  // cannot happen when holdable >= layers; kept as a guard
    result.binding = "memory: no layer split of the " + std::to_string(p) + " stages fits";
    return result;
  }
  if (!feasible(low)) {
    for (int i = 0; i < 100 && high - low > high * 1e-3; ++i) {
      const double mid = 0.5 * (low + high);
      (feasible(mid) ? high : low) = mid;
    }
    std::vector<double> candidates{high};
    for (int k = 0; k < p; ++k)
      for (const Option& o : options[k]) {
        if (o.fits == 0) continue;
        const Affine& t = o.time;
        // The layer counts whose time lies between the bounds (clamped before converting).
        int first = 1, last = 1;
        if (t.per_layer > 0) {
          first = static_cast<int>(std::clamp(std::ceil((low - t.fixed) / t.per_layer), 1.0, o.fits + 1.0));
          last = static_cast<int>(std::clamp(std::floor((high - t.fixed) / t.per_layer) + 1, 0.0, 1.0 * o.fits));
        }
        for (int n = first; n <= last; ++n)
          if (t.at(n) > low && t.at(n) < high) candidates.push_back(t.at(n));
      }
    std::sort(candidates.begin(), candidates.end());
    // feasible() only turns true as the time grows: the first feasible by bisection.
    size_t below = 0, above = candidates.size() - 1;  // candidates[above] (high) is feasible
    while (below < above) {
      const size_t middle = (below + above) / 2;
      if (feasible(candidates[middle]))
        above = middle;
      else
        below = middle + 1;
    }
    high = candidates[above];
  } else {
    high = low;
  }
  std::vector<int> n(p);
  std::vector<const Option*> chosen(p);
  int total = 0;
  for (int k = 0; k < p; ++k) total += n[k] = capacity(k, high);
  auto choose = [&](int k) -> const Option* {  // the fastest option that holds n[k] layers
    for (const Option& o : options[k])
      if (o.fits >= n[k]) return &o;
    return &options[k].back();
  };
  // Give back the excess from the slowest stages first, which keeps the stages balanced.
  while (total > layers) {
    int slowest = -1;
    double slowest_time = -1;
    for (int k = 0; k < p; ++k) {
      const double t = choose(k)->time.at(n[k]);
      if (n[k] > 1 && t > slowest_time) slowest = k, slowest_time = t;
    }
    --n[slowest];
    --total;
  }
  result.feasible = true;
  for (int k = 0; k < p; ++k) {
    chosen[k] = choose(k);
    stages[k].layers = n[k];
    stages[k].recompute = chosen[k]->recompute;
    result.bottleneck = std::max(result.bottleneck, chosen[k]->time.at(n[k]));
  }
  result.stages = std::move(stages);
  return result;
}

}  // namespace h2::heteroauto
