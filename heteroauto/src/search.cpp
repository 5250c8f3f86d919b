#include "h2/heteroauto/search.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <system_error>
#include <thread>
#include <tuple>

#include "h2/heteroauto/calibration.hpp"
#include "h2/heteroauto/layout.hpp"
#include "h2/heteroauto/partition.hpp"

namespace h2::heteroauto {

namespace {

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, s < 1 ? "%.1f ms" : "%.3f s", s < 1 ? s * 1e3 : s);
  return text;
}

// A pipeline class with its partition, times and its step-time estimate when it runs alone.
struct ClassCandidate {
  PartitionedClass pc;
  PipelineTimes times;
  double standalone = 0;
  // 0: the class fits with its own replicas. Else, under the distributed optimizer, the fewest
  // holders of each layer (every class's replicas) over which its stages' AdamW state must be sharded
  // to fit: it joins only combinations with at least that many replicas, and never runs alone.
  int needs_holders = 0;
};

// The counts of `from` added to `to` (not its groups or time).
void add_counts(SearchStats& to, const SearchStats& from) {
  to.layouts += from.layouts;
  to.pruned += from.pruned;
  to.partitioned += from.partitioned;
  to.infeasible += from.infeasible;
  to.combinations += from.combinations;
  to.simulated += from.simulated;
}

// What the search of one set of groups (or one refinement) counted and the infeasible layout that
// came closest (largest memory over need), for the explanation. Each block is searched on its own,
// possibly on another thread, and the tallies are merged in block order: the same result whatever
// the threads.
struct Tally {
  SearchStats stats;
  long too_deep = 0;  // layouts with more stages than layers
  double closest_fit = -1;
  std::string closest_binding;

  // Keeps the first of the closest.
  void note_closest(double fit, const std::function<std::string()>& why) {
    if (fit <= closest_fit) return;
    closest_fit = fit;
    closest_binding = why();
  }
  void add(const Tally& other) {
    add_counts(stats, other.stats);
    too_deep += other.too_deep;
    note_closest(other.closest_fit, [&] { return other.closest_binding; });
  }
};

// Runs work(i) for i in [0, count) on up to the machine's cores, each index once; rethrows the first
// failure (by index) after all have stopped.
void parallel_for(size_t count, const std::function<void(size_t)>& work) {
  const size_t threads = std::min<size_t>(count, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::exception_ptr> failures(count);
  std::atomic<size_t> next{0};
  const auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) {
      try {
        work(i);
      } catch (...) {
        failures[i] = std::current_exception();
      }
    }
  };
  {
    std::vector<std::jthread> pool;
    try {
      for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
    } catch (const std::system_error&) {
      // No more threads to be had (a process limit): the ones there are, this one included, do it all.
    }
    worker();
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

// A plan before simulation: one candidate per block of a set partition of the groups.
struct Combination {
  int micro_batch = 0;
  std::vector<const ClassCandidate*> classes;
  std::vector<MicroBatchSplit> split;
  double estimate = 0;
};

class Search {
 public:
  Search(const Cluster& cluster, const Model& model, const SearchOptions& options)
      : canonical_(canonicalize(cluster)),
        model_(model),
        options_(options),
        evaluator_(canonical_, model, options.schedule, options.gradients) {}

  SearchResult run();

 private:
  const Cluster& groups() const { return canonical_.cluster; }
  std::vector<std::vector<int>> orderings(std::vector<int> block) const;
  std::string describe(const ClassLayout& layout) const;
  struct SegmentTimes {
    double layer = 0;  // one layer's forward + backward
    double head = 0;   // what the LM head adds on the last stage
  };
  // By (group, tp, micro-batch); one per block searched.
  using SegmentCache = std::map<std::tuple<int, int, int>, SegmentTimes>;
  double lower_bound(const ClassLayout& layout, int micro_batch, int micro_batches, SegmentCache& cache) const;
  // The pipeline's memory and the model's weights, gradients and AdamW state sharded over `holders`
  // (0: the layout's own replicas), in bytes.
  std::pair<double, double> model_state_fit(const ClassLayout& layout, int holders) const;
  bool holds_model_state(const ClassLayout& layout, int micro_batch, Tally& tally) const;
  // The fewest holders, from the layout's replicas + 1 to `most`, with which a partition fits, and
  // that partition; {0, infeasible} where none does.
  std::pair<int, Partition> fewest_holders(const ClassLayout& layout, int micro_batch, int per_replica, int most,
                                           Tally& tally) const;
  // At most how many ranks can hold each layer in a plan in which `block`'s class has `replicas`:
  // every device outside the block a replica of its own, and no more replicas than micro-batches.
  int most_holders(const std::vector<int>& block, int replicas, int micro_batches) const;
  std::vector<ClassCandidate> best_classes(const std::vector<int>& block, int micro_batch, int micro_batches,
                                           Tally& tally) const;
  // The best estimates of one micro-batch size's combinations into `best` (keep()).
  void combine(int micro_batch, int micro_batches, const std::map<unsigned, std::vector<ClassCandidate>>& by_block,
               std::vector<Combination>& best, Tally& tally) const;
  // Adds c to a list of the best estimates, at most max(simulate, top): of equal estimates the first
  // kept stays first.
  void keep(std::vector<Combination>& best, Combination c) const;
  bool would_keep(const std::vector<Combination>& best, double estimate) const;
  size_t kept() const;  // how many estimates keep() keeps
  void count_every_holder(std::vector<PartitionedClass>& classes, const std::vector<MicroBatchSplit>& split,
                          int micro_batch, Evaluator::StepParts& best_parts, double& best_step, Tally& tally) const;
  // From a simulated plan: `best_parts` and `best_step` are what simulating `classes` gave.
  Plan refine(std::vector<PartitionedClass> classes, const std::vector<MicroBatchSplit>& split, int micro_batch,
              Evaluator::StepParts best_parts, double best_step, Tally& tally) const;

  CanonicalCluster canonical_;
  const Model& model_;
  SearchOptions options_;
  Evaluator evaluator_;
  SearchResult result_;
  Tally tally_;                    // merged from every block searched and every refinement
  std::vector<Combination> best_;  // best estimates, at most options_.simulate
  std::vector<std::unique_ptr<std::map<unsigned, std::vector<ClassCandidate>>>> storage_;
};

std::vector<std::vector<int>> Search::orderings(std::vector<int> block) const {
  std::vector<std::vector<int>> result;
  if (block.size() <= 5) {
    std::sort(block.begin(), block.end());
    do result.push_back(block);
    while (std::next_permutation(block.begin(), block.end()));
    return result;
  }
  // Too many permutations: memory-rich groups first (early stages hold the most activations under
  // 1F1B), and fastest first.
  auto memory = [&](int g) { return groups().device_type(groups().nodes[g].device_type).memory_gib; };
  auto speed = [&](int g) {
    const DeviceType& t = groups().device_type(groups().nodes[g].device_type);
    return t.peak_tflops.at(model_.dtype) * t.efficiency;
  };
  std::stable_sort(block.begin(), block.end(), [&](int a, int b) { return memory(a) > memory(b); });
  result.push_back(block);
  std::stable_sort(block.begin(), block.end(), [&](int a, int b) { return speed(a) > speed(b); });
  result.push_back(block);
  return result;
}

std::string Search::describe(const ClassLayout& layout) const {
  std::string text;
  for (const Segment& s : layout.segments) {
    if (!text.empty()) text += " -> ";
    text += groups().nodes[s.group].name + " " + std::to_string(s.stages) + "x tp" + std::to_string(s.tp);
  }
  return text + ", " + std::to_string(layout.replicas) + (layout.replicas == 1 ? " replica" : " replicas");
}

// No partition of this layout beats it, so it prunes without computing one: the layers spread
// continuously over the stages' speeds bound the slowest stage (which also carries at least one
// layer plus the LM head when it is the last); every stage runs at least one layer, the rest at
// best at the fastest stage's speed; transfers are exact; gradients are averaged at best over the
// fastest ring. Memory is ignored.
double Search::lower_bound(const ClassLayout& layout, int micro_batch, int micro_batches, SegmentCache& cache) const {
  double rate = 0, fastest = std::numeric_limits<double>::infinity(), one_each = 0;
  const SegmentTimes* last = nullptr;
  for (const Segment& s : layout.segments) {
    auto [it, fresh] = cache.try_emplace({s.group, s.tp, micro_batch});
    if (fresh) {
      StageSpec one{&groups().nodes[s.group], s.tp, 1};
      const StageTime t = evaluator_.cost().stage_time(one, micro_batch);
      one.last = true;
      const StageTime with_head = evaluator_.cost().stage_time(one, micro_batch);
      it->second = {t.forward + t.backward, with_head.forward + with_head.backward - (t.forward + t.backward)};
    }
    rate += s.stages / it->second.layer;
    fastest = std::min(fastest, it->second.layer);
    one_each += s.stages * it->second.layer;
    last = &it->second;
  }
  const int per_replica = (micro_batches + layout.replicas - 1) / layout.replicas;
  const double period = std::max(model_.layers / rate, last->layer + last->head);
  const double fill = one_each + (model_.layers - layout.stage_count()) * fastest + last->head +
                      2 * evaluator_.transfer_sum(layout, micro_batch);
  return fill + (per_replica - 1) * period + evaluator_.dp_allreduce_lower_bound(layout);
}

std::pair<double, double> Search::model_state_fit(const ClassLayout& layout, int holders) const {
  const CostModel& cost = evaluator_.cost();
  double capacity = 0;
  for (const StageSpec& s : evaluator_.stage_specs(layout)) capacity += s.tp * cost.device_capacity(s);
  StageSpec whole{&groups().nodes[layout.segments.front().group], 1, model_.layers, true, true};
  whole.replicas = layout.replicas;
  whole.holders = holders;
  return {capacity, cost.parameter_state_bytes(whole)};
}

// A necessary condition for any partition: the pipeline's memory holds the model's weights,
// gradients and optimizer state. Records the shortfall for the explanation when it does not.
bool Search::holds_model_state(const ClassLayout& layout, int micro_batch, Tally& tally) const {
  const auto [capacity, need] = model_state_fit(layout, 0);
  if (capacity >= need) return true;
  tally.note_closest(capacity / need, [&] {
    return "memory: the largest pipelines (" + describe(layout) + ", micro-batch " + std::to_string(micro_batch) +
           ") hold " + format_memory(capacity) + " per pipeline, less than the " + format_memory(need) +
           " of weights, gradients and AdamW state of the model";
  });
  return false;
}

int Search::most_holders(const std::vector<int>& block, int replicas, int micro_batches) const {
  int others = 0;
  for (int g = 0; g < static_cast<int>(groups().nodes.size()); ++g)
    if (std::ranges::find(block, g) == block.end()) others += groups().nodes[g].devices();
  return std::min(micro_batches, replicas + others);
}

// More holders only shrink a stage's memory, so both the model state's fit and a partition's are
// monotone in them: a bisection on the cheap necessary condition, then on partitions from there.
std::pair<int, Partition> Search::fewest_holders(const ClassLayout& layout, int micro_batch, int per_replica, int most,
                                                 Tally& tally) const {
  const auto state_fits = [&](int holders) {
    const auto [capacity, need] = model_state_fit(layout, holders);
    return capacity >= need;
  };
  const auto partition_with = [&](int holders) {
    std::vector<StageSpec> stages = evaluator_.stage_specs(layout);
    for (StageSpec& stage : stages) stage.holders = holders;
    ++tally.stats.partitioned;
    return partition_layers(evaluator_.cost(), std::move(stages), micro_batch, per_replica);
  };
  if (most <= layout.replicas || !state_fits(most)) return {0, {}};
  int low = layout.replicas + 1, high = most;  // the fewest whose model state fits lies in [low, high]
  while (low < high) {
    const int mid = low + (high - low) / 2;
    if (state_fits(mid))
      high = mid;
    else
      low = mid + 1;
  }
  Partition fits = partition_with(low);
  if (fits.feasible) return {low, std::move(fits)};
  if (low == most) return {0, {}};
  fits = partition_with(most);
  if (!fits.feasible) return {0, {}};
  int short_of = low, enough = most;  // a partition fits with `enough` holders, none with `short_of`
  while (enough - short_of > 1) {
    const int mid = short_of + (enough - short_of) / 2;
    Partition at = partition_with(mid);
    if (at.feasible)
      enough = mid, fits = std::move(at);
    else
      short_of = mid;
  }
  return {enough, std::move(fits)};
}

std::vector<ClassCandidate> Search::best_classes(const std::vector<int>& block, int micro_batch, int micro_batches,
                                                 Tally& tally) const {
  SegmentCache cache;
  struct Coarse {
    ClassLayout layout;
    double bound;
  };
  std::vector<Coarse> layouts;
  for (const std::vector<int>& order : orderings(block)) {
    for (int r : replica_options(groups(), block, micro_batches)) {
      // Each group's devices split evenly over the replicas, at every combination of TP degrees.
      for (const std::vector<int>& tps : tensor_parallel_combinations(groups(), model_, order, r)) {
        if (options_.max_tp > 0 && std::ranges::any_of(tps, [&](int tp) { return tp > options_.max_tp; })) continue;
        ClassLayout layout = even_class_layout(groups(), order, tps, r);
        ++tally.stats.layouts;
        if (layout.stage_count() > model_.layers)
          ++tally.too_deep;
        else
          layouts.push_back({layout, lower_bound(layout, micro_batch, micro_batches, cache)});
      }
    }
  }
  std::sort(layouts.begin(), layouts.end(), [](const Coarse& a, const Coarse& b) { return a.bound < b.bound; });

  // Each sorted by standalone estimate, at most options_.per_class: the layouts that fit with their own
  // replicas, and those that fit only with other classes' replicas sharing the distributed optimizer's
  // state (a class of small devices beside large ones), which only combinations can use.
  std::vector<ClassCandidate> best, leaning;
  const size_t keep = static_cast<size_t>(std::max(1, options_.per_class));
  const auto add = [&](std::vector<ClassCandidate>& list, ClassCandidate candidate, int per_replica) {
    candidate.times = evaluator_.pipeline_times(candidate.pc, micro_batch);
    candidate.standalone = evaluator_.estimate_pipeline(candidate.times, per_replica);
    if (list.size() == keep && candidate.standalone >= list.back().standalone) return;  // as in combine()
    candidate.standalone += evaluator_.after_pipeline_time({candidate.pc}, {candidate.times});
    auto at = std::upper_bound(list.begin(), list.end(), candidate.standalone,
                               [](double t, const ClassCandidate& c) { return t < c.standalone; });
    list.insert(at, std::move(candidate));
    if (list.size() > keep) list.pop_back();
  };
  const bool may_lean = evaluator_.cost().gradients().distributed_optimizer;
  const auto beyond = [&](const std::vector<ClassCandidate>& list, double bound) {
    return options_.prune && list.size() == keep && bound >= list.back().standalone;
  };
  // A layout that does not fit over its own replicas may still fit beside other classes.
  const auto try_leaning = [&](const ClassLayout& layout, int per_replica) {
    auto [holders, partition] =
        fewest_holders(layout, micro_batch, per_replica, most_holders(block, layout.replicas, micro_batches), tally);
    if (!partition.feasible) return false;
    add(leaning, {{layout, std::move(partition.stages)}, {}, 0, holders}, per_replica);
    return true;
  };
  for (size_t i = 0; i < layouts.size(); ++i) {
    const bool alone_pruned = beyond(best, layouts[i].bound),
               lean_pruned = !may_lean || beyond(leaning, layouts[i].bound);
    if (alone_pruned && lean_pruned) {
      tally.stats.pruned += static_cast<long>(layouts.size() - i);
      break;
    }
    const ClassLayout& layout = layouts[i].layout;
    const int per_replica = (micro_batches + layout.replicas - 1) / layout.replicas;
    if (alone_pruned) {
      // No class that fits alone from here on beats those kept, but one that leans still may: those
      // that do not hold the model state alone (a test without a partition) are tried. One that holds
      // it and fails its partition only for activations is not (the bound's guarantee covers the
      // classes that fit alone).
      const auto [capacity, need] = model_state_fit(layout, 0);
      if (capacity >= need || !try_leaning(layout, per_replica)) ++tally.stats.pruned;
      continue;
    }
    Partition partition;
    if (holds_model_state(layout, micro_batch, tally)) {
      ++tally.stats.partitioned;
      partition = partition_layers(evaluator_.cost(), evaluator_.stage_specs(layout), micro_batch, per_replica);
      // Any layout that holds the model state is closer than one that does not.
      if (!partition.feasible) tally.note_closest(1, [&] { return partition.binding + " (" + describe(layout) + ")"; });
    }
    if (partition.feasible)
      add(best, {{layout, partition.stages}, {}, 0, 0}, per_replica);
    else if (lean_pruned || !try_leaning(layout, per_replica))
      ++tally.stats.infeasible;
  }
  best.insert(best.end(), std::make_move_iterator(leaning.begin()), std::make_move_iterator(leaning.end()));
  return best;
}

size_t Search::kept() const {
  return static_cast<size_t>(std::max(options_.simulate, options_.top));
}

bool Search::would_keep(const std::vector<Combination>& best, double estimate) const {
  return best.size() < kept() || estimate < best.back().estimate;
}

void Search::keep(std::vector<Combination>& best, Combination c) const {
  if (!would_keep(best, c.estimate)) return;
  auto at = std::upper_bound(best.begin(), best.end(), c.estimate,
                             [](double t, const Combination& x) { return t < x.estimate; });
  best.insert(at, std::move(c));
  if (best.size() > kept()) best.pop_back();
}

void Search::combine(int micro_batch, int micro_batches,
                     const std::map<unsigned, std::vector<ClassCandidate>>& by_block, std::vector<Combination>& best,
                     Tally& tally) const {
  // One candidate per block of every set partition of the groups, micro-batches water-filled.
  for_each_class_partition(
      static_cast<int>(groups().nodes.size()), options_.max_classes, [&](const std::vector<unsigned>& masks) {
        std::vector<const std::vector<ClassCandidate>*> choices;
        std::vector<size_t> sizes;
        for (unsigned mask : masks) {
          auto it = by_block.find(mask);
          if (it == by_block.end()) return true;
          choices.push_back(&it->second);
          sizes.push_back(it->second.size());
        }
        for_each_pick(sizes, [&](const std::vector<size_t>& pick) {
          Combination c;
          c.micro_batch = micro_batch;
          std::vector<PipelineTimes> times;
          std::vector<int> replicas;
          std::vector<PartitionedClass> classes;
          int needs_holders = 0;
          for (size_t b = 0; b < choices.size(); ++b) {
            const ClassCandidate& candidate = (*choices[b])[pick[b]];
            c.classes.push_back(&candidate);
            times.push_back(candidate.times);
            replicas.push_back(candidate.pc.layout.replicas);
            classes.push_back(candidate.pc);
            needs_holders = std::max(needs_holders, candidate.needs_holders);
          }
          if (needs_holders > layer_holders(classes)) return true;  // a class would not fit
          ++tally.stats.combinations;
          c.split = evaluator_.split_micro_batches(times, replicas, micro_batches);
          if (!c.split.empty()) {
            for (size_t b = 0; b < choices.size(); ++b)
              c.estimate = std::max(c.estimate, evaluator_.estimate_pipeline(times[b], c.split[b].most()));
            // What follows the pipelines only adds: a combination already behind the last kept is
            // not kept, and its gradient sums (the costliest part of an estimate) need not be worked out.
            if (!would_keep(best, c.estimate)) return true;
            c.estimate += evaluator_.after_pipeline_time(classes, times);
            keep(best, std::move(c));
          }
          return true;
        });
        return true;
      });
}

// A class is partitioned knowing only its own replicas, but the distributed optimizer shards each
// layer over every class's (each class's pipeline holds every layer), which frees memory that
// partition did not count: with the classes known, each stage's recomputation is chosen again, and
// each class partitioned again, and whichever of the two (or the plan as it was) simulates fastest
// is kept. Both only gain: with more shards every choice that fitted still fits.
void Search::count_every_holder(std::vector<PartitionedClass>& classes, const std::vector<MicroBatchSplit>& split,
                                int micro_batch, Evaluator::StepParts& best_parts, double& best_step,
                                Tally& tally) const {
  if (!evaluator_.cost().gradients().distributed_optimizer || classes.size() < 2) return;
  const int holders = layer_holders(classes);
  std::vector<PartitionedClass> rechosen = classes, repartitioned = classes;
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const int p = static_cast<int>(classes[ci].stages.size()), in_flight = split[ci].most();
    for (int k = 0; k < p; ++k) {
      StageSpec& stage = rechosen[ci].stages[static_cast<size_t>(k)];
      stage.holders = holders;
      choose_recompute(evaluator_.cost(), stage, micro_batch, std::min(in_flight, p - k));  // fits: it did with fewer
    }
    const Partition partition = partition_layers(evaluator_.cost(), rechosen[ci].stages, micro_batch, in_flight);
    repartitioned[ci].stages = partition.feasible ? partition.stages : rechosen[ci].stages;
  }
  const auto take_if_faster = [&](const std::vector<PartitionedClass>& candidate, double tolerance) {
    Evaluator::StepParts parts = evaluator_.step_parts(candidate, split, micro_batch);
    const double step = evaluator_.step_time(candidate, parts);
    ++tally.stats.simulated;
    if (step > best_step * tolerance) return;
    best_step = step;
    best_parts = std::move(parts);
    classes = candidate;
  };
  // The re-chosen stages replace the plan's also at an equal step, so that its memory counts every holder.
  take_if_faster(rechosen, 1 + 1e-9);
  take_if_faster(repartitioned, 1 - 1e-9);
}

// The bottleneck partition minimises the slowest stage, not the simulated step, in which the fill
// and the LM head's stage also count: move single layers between neighbouring stages while the
// simulated step improves and memory still fits.
Plan Search::refine(std::vector<PartitionedClass> classes, const std::vector<MicroBatchSplit>& split, int micro_batch,
                    Evaluator::StepParts best_parts, double best_step, Tally& tally) const {
  // Candidates are compared by their step time alone, re-simulating only the class a move changed;
  // the plan is built once, for the best.
  for (int round = 0; round < 4 * model_.layers; ++round) {
    bool improved = false;
    for (size_t ci = 0; ci < classes.size() && !improved; ++ci) {
      const int p = static_cast<int>(classes[ci].stages.size());
      for (int k = 0; k + 1 < p && !improved; ++k) {
        for (int from : {k, k + 1}) {
          const int to = from == k ? k + 1 : k;
          std::vector<PartitionedClass> moved = classes;
          std::vector<StageSpec>& stages = moved[ci].stages;
          if (stages[from].layers <= 1) continue;
          --stages[from].layers;
          ++stages[to].layers;
          const int in_flight = split[ci].most();
          if (!choose_recompute(evaluator_.cost(), stages[from], micro_batch, std::min(in_flight, p - from)) ||
              !choose_recompute(evaluator_.cost(), stages[to], micro_batch, std::min(in_flight, p - to)))
            continue;
          Evaluator::StepParts parts = best_parts;
          evaluator_.update_step_parts(parts, moved, split, micro_batch, ci);
          const double step = evaluator_.step_time(moved, parts);
          ++tally.stats.simulated;
          if (step < best_step * (1 - 1e-9)) {
            best_step = step;
            best_parts = std::move(parts);
            classes = std::move(moved);
            improved = true;
            break;
          }
        }
      }
    }
    if (!improved) break;
  }
  // The plan's memory figures count every holder (a leaning class's stages, where count_every_holder
  // kept neither variant, still carry the fewest it needed).
  if (evaluator_.cost().gradients().distributed_optimizer) {
    const int holders = layer_holders(classes);
    for (PartitionedClass& c : classes)
      for (StageSpec& stage : c.stages) stage.holders = holders;
  }
  return evaluator_.build_plan(classes, split, micro_batch);
}

SearchResult Search::run() {
  const auto start = std::chrono::steady_clock::now();
  const int n = static_cast<int>(groups().nodes.size());
  result_.stats.groups = n;
  if (n > 16) throw DescriptionError("the cluster has more than 16 distinct node groups; merge identical ones");
  for (int g = 0; g < n; ++g) {
    const NodeGroup& group = groups().nodes[g];
    result_.explanation.push_back("group " + std::to_string(g) + ": " + group.name + ": " +
                                  std::to_string(group.devices()) + " x " + group.device_type + " (" +
                                  std::to_string(group.devices_per_node) + " per node, NIC " + group.nic +
                                  ", cluster '" + group.cluster + "')");
  }
  std::vector<int> sizes;
  for (int b : model_.micro_batch_sizes)
    if (model_.global_batch % b == 0) sizes.push_back(b);
  if (sizes.empty()) {
    result_.infeasible = "batch: the global batch " + std::to_string(model_.global_batch) +
                         " is not a multiple of any micro-batch size in micro_batch_sizes";
    return result_;
  }
  // Every set of groups (block) at every micro-batch size is searched on its own, and then each
  // size's candidates are combined on their own, at once on the machine's cores; what they found is
  // merged in (size, block) order below.
  const size_t blocks = (size_t{1} << n) - 1;
  const auto block_of = [&](size_t i) {
    std::vector<int> block;
    for (int g = 0; g < n; ++g)
      if ((i + 1) & (size_t{1} << g)) block.push_back(g);
    return block;
  };
  std::vector<std::vector<ClassCandidate>> found(sizes.size() * blocks);
  std::vector<Tally> tallies(sizes.size() * blocks);
  // The sets of the most groups take longest (more orderings and degrees): started first, so that no
  // core finishes early while the last of them still runs on another.
  std::vector<size_t> largest_first(found.size());
  std::iota(largest_first.begin(), largest_first.end(), size_t{0});
  std::stable_sort(largest_first.begin(), largest_first.end(),
                   [&](size_t a, size_t b) { return std::popcount(a % blocks + 1) > std::popcount(b % blocks + 1); });
  parallel_for(found.size(), [&](size_t k) {
    const size_t i = largest_first[k];
    const int b = sizes[i / blocks];
    found[i] = best_classes(block_of(i % blocks), b, static_cast<int>(model_.global_batch / b), tallies[i]);
  });
  for (size_t si = 0; si < sizes.size(); ++si) {
    auto by_block = std::make_unique<std::map<unsigned, std::vector<ClassCandidate>>>();
    for (size_t i = 0; i < blocks; ++i) (*by_block)[static_cast<unsigned>(i + 1)] = std::move(found[si * blocks + i]);
    storage_.push_back(std::move(by_block));
  }
  std::vector<std::vector<Combination>> combined(sizes.size());
  std::vector<Tally> combining(sizes.size());
  parallel_for(sizes.size(), [&](size_t si) {
    const int b = sizes[si];
    combine(b, static_cast<int>(model_.global_batch / b), *storage_[si], combined[si], combining[si]);
  });
  for (size_t si = 0; si < sizes.size(); ++si) {
    const int b = sizes[si];
    const SearchStats before = tally_.stats;
    for (size_t i = 0; i < blocks; ++i) {
      tally_.add(tallies[si * blocks + i]);
      const std::vector<ClassCandidate>& best = storage_[si]->at(static_cast<unsigned>(i + 1));
      if (!best.empty()) {
        std::string names;
        for (int g : block_of(i)) names += (names.empty() ? "" : ", ") + groups().nodes[g].name;
        const ClassCandidate& first = best.front();
        // A class that fits only beside others has no time of its own to show.
        result_.explanation.push_back(
            "  micro-batch " + std::to_string(b) +
            (first.needs_holders == 0
                 ? ", best alone on {" + names + "}: " + describe(first.pc.layout) + ": " +
                       seconds_text(first.standalone)
                 : ", on {" + names + "} only beside other classes: " + describe(first.pc.layout) +
                       ", its AdamW state sharded over " + std::to_string(first.needs_holders) + " replicas or more"));
      }
    }
    tally_.add(combining[si]);
    for (Combination& c : combined[si]) keep(best_, std::move(c));
    result_.explanation.push_back("micro-batch " + std::to_string(b) + " (" + std::to_string(model_.global_batch / b) +
                                  " micro-batches): " + std::to_string(tally_.stats.layouts - before.layouts) +
                                  " layouts, " + std::to_string(tally_.stats.pruned - before.pruned) +
                                  " pruned by the bound, " +
                                  std::to_string(tally_.stats.partitioned - before.partitioned) + " partitioned, " +
                                  std::to_string(tally_.stats.infeasible - before.infeasible) + " did not fit, " +
                                  std::to_string(tally_.stats.combinations - before.combinations) + " combinations");
  }

  // Simulate the best estimates, each with every class's replicas counted (count_every_holder: a
  // multi-class plan under the distributed optimizer often runs faster than its classes' partitions,
  // made apart, suggest, and ranking it on those would leave it out of the few refined), then refine
  // the layer split of the best few.
  struct Simulated {
    double step = 0;
    const Combination* combination = nullptr;
    std::vector<PartitionedClass> classes;
    Evaluator::StepParts parts;
  };
  std::vector<Simulated> simulated(best_.size());
  std::vector<Tally> simulating(best_.size());
  parallel_for(best_.size(), [&](size_t i) {
    const Combination& c = best_[i];
    Simulated& s = simulated[i];
    s.combination = &c;
    for (const ClassCandidate* candidate : c.classes) s.classes.push_back(candidate->pc);
    s.parts = evaluator_.step_parts(s.classes, c.split, c.micro_batch);
    s.step = evaluator_.step_time(s.classes, s.parts);
    ++simulating[i].stats.simulated;
    count_every_holder(s.classes, c.split, c.micro_batch, s.parts, s.step, simulating[i]);
  });
  for (const Tally& t : simulating) tally_.add(t);
  std::stable_sort(simulated.begin(), simulated.end(),
                   [](const Simulated& a, const Simulated& b) { return a.step < b.step; });
  const size_t refined = std::min(simulated.size(), static_cast<size_t>(std::max(options_.top, options_.refine)));
  // Each refinement on its own, at once on the machine's cores.
  std::vector<Plan> plans(refined);
  std::vector<Tally> refinements(refined);
  parallel_for(refined, [&](size_t i) {
    Simulated& s = simulated[i];
    const Combination& c = *s.combination;
    plans[i] = refine(std::move(s.classes), c.split, c.micro_batch, std::move(s.parts), s.step, refinements[i]);
  });
  for (size_t i = 0; i < refined; ++i) {
    tally_.add(refinements[i]);
    result_.plans.push_back(std::move(plans[i]));
  }
  std::stable_sort(result_.plans.begin(), result_.plans.end(),
                   [](const Plan& a, const Plan& b) { return a.prediction.step_time_s < b.prediction.step_time_s; });
  if (result_.plans.size() > static_cast<size_t>(options_.top)) result_.plans.resize(options_.top);
  if (result_.plans.empty()) {
    if (!tally_.closest_binding.empty())
      result_.infeasible = tally_.closest_binding;
    else if (tally_.too_deep > 0)
      result_.infeasible = "depth: every layout has more pipeline stages than the model's " +
                           std::to_string(model_.layers) + " layers and no replica count or TP degree reduces them";
    else
      result_.infeasible = "batch: no layout has at most as many replicas as the " +
                           std::to_string(model_.global_batch) + "-sample global batch has micro-batches";
  }
  result_.stats = tally_.stats;
  result_.stats.groups = n;
  result_.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result_;
}

// How far a fit leaves its runs, where it leaves them any distance: a fit that cannot explain its runs
// must say so, or its value would be taken at its word.
std::string fit_quality(const CalibrationFit& fit) {
  const double percent = (std::exp(fit.rms_log_error) - 1) * 100;
  if (percent < 0.05) return "";
  char text[96];
  std::snprintf(text, sizeof text, " (the runs then predicted %.1f%% off, root mean square%s)", percent,
                percent > 25 ? ": the model does not explain them" : "");
  return text;
}

// Whether two plans run the same stages (groups, degrees, layers, recomputation) on the same devices
// with the same micro-batches: all but the optimizer's setting and what follows from it.
bool same_layout(const Plan& a, const Plan& b) {
  if (a.micro_batch_size != b.micro_batch_size || a.pipelines.size() != b.pipelines.size()) return false;
  for (size_t i = 0; i < a.pipelines.size(); ++i) {
    const PlanPipeline &x = a.pipelines[i], &y = b.pipelines[i];
    if (x.stages.size() != y.stages.size() || x.replicas.size() != y.replicas.size()) return false;
    for (size_t k = 0; k < x.stages.size(); ++k) {
      const PlanStage &s = x.stages[k], &t = y.stages[k];
      if (s.node_group != t.node_group || s.tp != t.tp || s.first_layer != t.first_layer || s.layers != t.layers ||
          s.recompute != t.recompute)
        return false;
    }
    for (size_t r = 0; r < x.replicas.size(); ++r)
      if (x.replicas[r].micro_batches != y.replicas[r].micro_batches || x.replicas[r].devices != y.replicas[r].devices)
        return false;
  }
  return true;
}

// The plans of a search without the distributed optimizer and of one with it, merged: the fastest
// first (of equal ones, the one without), each layout once, the stats of both, the explanation of the search whose plan
// won and one line for the other. Where neither fits, the search with it names the binding
// constraint: it had the more memory.
SearchResult merge_optimizer_choice(SearchResult without, SearchResult with, int top) {
  auto best = [](const SearchResult& r) {
    return r.plans.empty() ? std::numeric_limits<double>::infinity() : r.plans.front().prediction.step_time_s;
  };
  const double best_without = best(without), best_with = best(with);
  const bool chosen = best_with < best_without;
  SearchResult merged = std::move(chosen ? with : without);
  const SearchResult& other = chosen ? without : with;
  merged.plans.insert(merged.plans.end(), other.plans.begin(), other.plans.end());
  // Both searches often find the same layout: it is listed once, with the faster setting (without
  // it where they tie, as a layout of one replica per layer does: nothing to shard).
  const auto beaten = [](const Plan& p, const Plan& q) {
    return p.distributed_optimizer != q.distributed_optimizer && same_layout(p, q) &&
           (q.prediction.step_time_s < p.prediction.step_time_s ||
            (q.prediction.step_time_s == p.prediction.step_time_s && p.distributed_optimizer));
  };
  std::vector<Plan> distinct;
  for (const Plan& p : merged.plans)
    if (std::ranges::none_of(merged.plans, [&](const Plan& q) { return beaten(p, q); })) distinct.push_back(p);
  merged.plans = std::move(distinct);
  std::stable_sort(merged.plans.begin(), merged.plans.end(), [&](const Plan& a, const Plan& b) {
    if (a.prediction.step_time_s != b.prediction.step_time_s)
      return a.prediction.step_time_s < b.prediction.step_time_s;
    return !a.distributed_optimizer && b.distributed_optimizer;
  });
  if (merged.plans.size() > static_cast<size_t>(top)) merged.plans.resize(static_cast<size_t>(top));
  add_counts(merged.stats, other.stats);
  merged.stats.searches = 2;
  if (merged.plans.empty())
    merged.infeasible = with.infeasible.starts_with("memory: ")
                            ? with.infeasible + " (also planned with the distributed optimizer)"
                            : with.infeasible;
  auto best_text = [&](double t) { return std::isinf(t) ? std::string("nothing fits") : seconds_text(t); };
  merged.explanation.push_back(std::string("distributed optimizer: ") +
                               (merged.plans.empty() ? "nothing fits with it or without it"
                                : chosen ? "chosen: its best plan takes " + best_text(best_with) + ", without it " +
                                               best_text(best_without) + " (the lines above are the search with it)"
                                         : "not chosen: with it the best plan takes " + best_text(best_with) +
                                               ", without it " + best_text(best_without)));
  return merged;
}

}  // namespace

SearchResult search_plans(const Cluster& cluster, const Model& model, const SearchOptions& options) {
  if (options.top < 1 || options.per_class < 1 || options.refine < 1 || options.max_classes < 0)
    throw std::invalid_argument("search options: top, per_class and refine must be at least 1, max_classes at least 0");
  SearchOptions effective = options;
  if (effective.max_classes == 0) {
    std::set<std::string> types;
    for (const NodeGroup& g : cluster.nodes) types.insert(g.device_type);
    effective.max_classes = std::max(3, static_cast<int>(types.size()));
  }
  std::vector<CalibrationFit> fits;
  const Cluster calibrated = calibrate_cluster(cluster, &fits);
  const auto start = std::chrono::steady_clock::now();
  SearchResult result;
  if (effective.choose_distributed_optimizer && !effective.gradients.distributed_optimizer) {
    // The two searches at once: each alone leaves cores idle while its largest sets of groups finish.
    SearchOptions sharded = effective;
    sharded.gradients.distributed_optimizer = true;
    const auto search_with = [&] { return Search(calibrated, model, sharded).run(); };
    std::future<SearchResult> with;
    try {
      with = std::async(std::launch::async, search_with);
    } catch (const std::system_error&) {
      with = std::async(std::launch::deferred, search_with);  // no thread to be had: one after the other
    }
    SearchResult without = Search(calibrated, model, effective).run();
    result = merge_optimizer_choice(std::move(without), with.get(), effective.top);
    result.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } else {
    result = Search(calibrated, model, effective).run();
  }
  result.calibration = fits;
  for (const CalibrationFit& fit : fits) {
    char value[32];
    std::snprintf(value, sizeof value, "%.3f", fit.model.empty() ? fit.efficiency : fit.fixed_share);
    const std::string what = fit.model.empty()
                                 ? std::string("efficiency ") + value
                                 : "fixed share " + std::string(value) + " of its " + fit.model + " profile";
    std::string steps;
    for (double s : fit.measured_step_s) steps += (steps.empty() ? "" : ", ") + seconds_text(s);
    result.explanation.insert(result.explanation.begin(),
                              "calibrated " + fit.device_type + ": " + what +
                                  (fit.measured_step_s.size() == 1 ? " meets the " + steps + " step of "
                                                                   : " fits the " + steps + " steps of ") +
                                  fit.source + fit_quality(fit));
  }
  return result;
}

}  // namespace h2::heteroauto
