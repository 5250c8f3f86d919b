#include <algorithm>
#include <cstdio>
#include <limits>
#include <numeric>
#include <queue>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {

namespace {

std::string milliseconds(double seconds) {
  char text[32];
  if (seconds < 1e-4)
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  else
    std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
  return text;
}

std::string count_text(double value) {  // "2", "1.5"
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// The largest of per-class, per-stage times (0 for none).
double slowest(const std::vector<std::vector<double>>& times) {
  double largest = 0;
  for (const std::vector<double>& stages : times)
    for (double t : stages) largest = std::max(largest, t);
  return largest;
}

}  // namespace

int ClassLayout::stage_count() const {
  int p = 0;
  for (const Segment& s : segments) p += s.stages;
  return p;
}

Evaluator::Evaluator(const CanonicalCluster& canonical, const Model& model, Schedule schedule,
                     GradientSettings gradients, PipelineRuntime runtime)
    : canonical_(canonical), cost_(canonical.cluster, model, gradients), schedule_(schedule), runtime_(runtime) {
  const Cluster& c = canonical.cluster;
  for (const NodeGroup& g : c.nodes) {
    nic_all_at_once_.push_back(cost_.nic_link(g, g.devices_per_node, CostModel::Traffic::collective));
    nic_one_.push_back(cost_.nic_link(g, 1, CostModel::Traffic::collective).bandwidth_gbps);
    nic_ethernet_.push_back(c.nic(g.nic).kind == NicKind::ethernet);
  }
  for (const NodeGroup& g : c.nodes) {
    between_.emplace_back();
    for (const NodeGroup& other : c.nodes) {
      const bool direct =
          c.collectives_direct(c.device_type(g.device_type).vendor, c.device_type(other.device_type).vendor);
      between_.back().push_back(
          {direct, g.cluster == other.cluster ? nullptr : c.inter_cluster_link(g.cluster, other.cluster)});
    }
  }
}

int64_t Evaluator::replica_stride(const ClassLayout& layout, size_t segment) {
  const Segment& s = layout.segments[segment];
  return layout.stage_major ? s.tp : s.devices();
}

int64_t Evaluator::first_device(const ClassLayout& layout, size_t segment, int64_t replica, int stage) {
  const Segment& s = layout.segments[segment];
  return layout.stage_major ? (int64_t{stage} * layout.replicas + replica) * s.tp
                            : replica * s.devices() + int64_t{stage} * s.tp;
}

int Evaluator::replicas_per_node(const ClassLayout& layout, size_t segment) const {
  const int64_t per_node = cluster().nodes[layout.segments[segment].group].devices_per_node;
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>(layout.replicas, per_node / replica_stride(layout, segment))));
}

Evaluator::Hop Evaluator::hop(const ClassLayout& layout, size_t segment, int k) const {
  const Segment& a = layout.segments[segment];
  const bool within = k + 1 < a.stages;
  const size_t next = within ? segment : segment + 1;
  const Segment& b = layout.segments[next];
  const int64_t na = cluster().nodes[a.group].devices_per_node, nb = cluster().nodes[b.group].devices_per_node;
  // Replica by replica with each replica's devices filling whole nodes or a whole number of them
  // in a node (the search's even layouts): which hops cross, and how many ranks share a node's
  // crossing, follow from the sizes alone.
  const auto aligned = [](int64_t devices, int64_t per_node) {
    return per_node % devices == 0 || devices % per_node == 0;
  };
  if (!layout.stage_major && aligned(a.devices(), na) && aligned(b.devices(), nb) && na % a.tp == 0 && nb % b.tp == 0) {
    Hop hop;
    if (within) {
      if (a.devices() <= na || (int64_t{k + 1} * a.tp) % na != 0) return hop;  // stays in its node
      hop.same_node = false;
      hop.senders = hop.receivers = a.tp;
      return hop;
    }
    hop.same_node = false;
    hop.senders = a.tp * static_cast<int>(std::min<int64_t>(layout.replicas, std::max<int64_t>(1, na / a.devices())));
    hop.receivers = b.tp * static_cast<int>(std::min<int64_t>(layout.replicas, std::max<int64_t>(1, nb / b.devices())));
    return hop;
  }
  const auto sender_node = [&](int64_t r) { return first_device(layout, segment, r, k) / na; };
  const auto receiver_node = [&](int64_t r) { return first_device(layout, next, r, within ? k + 1 : 0) / nb; };
  const auto crosses = [&](int64_t r) { return !within || sender_node(r) != receiver_node(r); };
  // Consecutive replicas' devices lie `stride` apart, so their offsets in a node repeat every
  // n / gcd(stride, n) replicas, and replicas further apart than a node's width never share one.
  const int64_t sa = replica_stride(layout, segment), sb = replica_stride(layout, next);
  const int64_t pa = na / std::gcd(sa, na), pb = nb / std::gcd(sb, nb);
  const int64_t period = pa / std::gcd(pa, pb) * pb, reach = std::max(na / sa, nb / sb) + 1;
  Hop hop;
  for (int64_t r = 0; r < std::min<int64_t>(layout.replicas, period); ++r) {
    if (!crosses(r)) continue;
    hop.same_node = false;
    int senders = 0, receivers = 0;
    for (int64_t q = std::max<int64_t>(0, r - reach); q <= std::min<int64_t>(layout.replicas - 1, r + reach); ++q) {
      if (!crosses(q)) continue;
      if (sender_node(q) == sender_node(r)) senders += a.tp;
      if (receiver_node(q) == receiver_node(r)) receivers += b.tp;
    }
    hop.senders = std::max(hop.senders, senders);
    hop.receivers = std::max(hop.receivers, receivers);
  }
  return hop;
}

double Evaluator::dp_allreduce_lower_bound(const ClassLayout& layout) const {
  if (layout.replicas <= 1) return 0;
  const int p = layout.stage_count();
  const bool overlap = cost_.gradients().overlap;
  // Some stage holds ceil(L / p) layers or more; with overlapping sums only the last layer's share of
  // stage 0's sum must be exposed, which is at least 1 / L of the whole model's (the latency is paid
  // once however many layers share it).
  const double layers = overlap ? cost_.model().layers : (cost_.model().layers + p - 1) / p;
  double fastest = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < layout.segments.size(); ++i) {
    const Segment& s = layout.segments[i];
    const double bytes = layers * cost_.layer_parameters() * cost_.gradients().comm_bytes / s.tp;
    RingMembers members{};
    members[s.group] = {layout.replicas, replicas_per_node(layout, i)};
    fastest = std::min(fastest, hierarchical_allreduce(1u << s.group, members, bytes, s.tp));
  }
  // The distributed optimizer's reduce-scatter carries half an allreduce's traffic (its gather after
  // the optimizer step only adds).
  const double sum = cost_.distributed_optimizer() ? fastest / 2 : fastest;
  return overlap ? sum / layers : sum;
}

double Evaluator::transfer_sum(const ClassLayout& layout, int micro_batch) const {
  const double bytes = cost_.boundary_bytes(micro_batch);
  double sum = 0;
  for (size_t i = 0; i < layout.segments.size(); ++i) {
    const Segment& s = layout.segments[i];
    const StageSpec here{.nodes = &cluster().nodes[s.group], .tp = s.tp, .replicas = layout.replicas};
    for (int k = 0; k < s.stages; ++k) {
      if (k + 1 == s.stages && i + 1 == layout.segments.size()) break;
      const Segment& n = k + 1 < s.stages ? s : layout.segments[i + 1];
      const StageSpec next{&cluster().nodes[n.group], n.tp};
      const Hop h = hop(layout, i, k);
      sum += cost_.transfer_time(cost_.link_between(here, next, h.same_node, h.senders, h.receivers), bytes);
    }
  }
  return sum;
}

std::vector<StageSpec> Evaluator::stage_specs(const ClassLayout& layout) const {
  std::vector<StageSpec> stages;
  for (const Segment& s : layout.segments)
    for (int i = 0; i < s.stages; ++i) stages.push_back({&cluster().nodes[s.group], s.tp});
  if (!stages.empty()) {
    stages.front().first = true;
    stages.back().last = true;
  }
  for (StageSpec& stage : stages) stage.replicas = layout.replicas;
  return stages;
}

PipelineTimes Evaluator::pipeline_times(const PartitionedClass& c, int micro_batch) const {
  PipelineTimes times;
  const bool deepspeed = runtime_ == PipelineRuntime::deepspeed;
  times.blocking_sends = deepspeed;
  for (const StageSpec& stage : c.stages) {
    const StageTime t = cost_.stage_time(stage, micro_batch);
    times.forward.push_back(t.forward);
    times.backward.push_back(t.backward);
  }
  size_t k = 0;
  const std::vector<Segment>& segments = c.layout.segments;
  for (size_t si = 0; si < segments.size(); ++si) {
    for (int i = 0; i < segments[si].stages; ++i, ++k) {
      if (k + 1 >= c.stages.size()) break;
      const Hop h = hop(c.layout, si, i);
      const Link link = cost_.link_between(c.stages[k], c.stages[k + 1], h.same_node, h.senders, h.receivers);
      const double whole = cost_.boundary_bytes(micro_batch);
      double transfer = cost_.transfer_time(link, deepspeed ? whole / c.stages[k].tp : whole);
      // DeepSpeed's receivers gather the pieces inside their node (an allgather: half an allreduce).
      if (deepspeed && c.stages[k + 1].tp > 1)
        transfer += cost_.allreduce_time(cost_.intra_node_link(*c.stages[k + 1].nodes), whole, c.stages[k + 1].tp) / 2;
      times.transfer.push_back(transfer);
    }
  }
  return times;
}

double Evaluator::estimate_pipeline(const PipelineTimes& times, int micro_batches) const {
  return pipeline_estimate(times).at(micro_batches);
}

PipelineEstimate Evaluator::pipeline_estimate(const PipelineTimes& times) const {
  const size_t p = times.forward.size();
  double sum = 0;
  for (size_t k = 0; k < p; ++k) sum += times.forward[k] + times.backward[k];
  for (double t : times.transfer) sum += 2 * t;
  // The steady-state period: no stage is faster than its own forward + backward, and under 1F1B
  // stage k keeps only p - k micro-batches in flight, so it can start a new one no more often than
  // once per (round trip from k to the last stage and back) / (p - k).
  double period = 0, round_trip = 0;
  for (size_t k = p; k-- > 0;) {
    round_trip += times.forward[k] + times.backward[k];
    if (k + 1 < p) round_trip += 2 * times.transfer[k];
    period = std::max({period, times.forward[k] + times.backward[k], round_trip / static_cast<double>(p - k)});
  }
  return {sum, period};
}

Link Evaluator::ring_link(unsigned groups, int rings) const {
  Link link;
  bool first = true;
  for (int g = 0; g < static_cast<int>(nic_all_at_once_.size()); ++g) {
    if (!(groups & (1u << g))) continue;
    const Link& nic = nic_all_at_once_[g];
    if (first) {
      link = nic;
      link.host_staged = false;  // as the facts below say
    }
    first = false;
    link.bandwidth_gbps = std::min(link.bandwidth_gbps, nic.bandwidth_gbps);
    link.latency_us = std::max(link.latency_us, nic.latency_us);
    link.host_link_gbps = std::min(link.host_link_gbps, nic.host_link_gbps);
    // Staged over plain Ethernet, or where the pairs' facts say so (between_ below, this group with
    // itself included): between two vendors the pair's fact counts, not each vendor's own.
    link.host_staged = link.host_staged || nic_ethernet_[g];
    for (int other = 0; other < static_cast<int>(nic_all_at_once_.size()); ++other) {
      if (!(groups & (1u << other))) continue;
      const Between& between = between_[g][other];
      if (!between.device_direct) link.host_staged = true;
      if (between.inter_cluster != nullptr) {
        link.bandwidth_gbps = std::min(link.bandwidth_gbps, between.inter_cluster->bandwidth_gbps / rings);
        link.latency_us = std::max(link.latency_us, nic.latency_us + between.inter_cluster->latency_us);
      }
    }
  }
  return link;
}

double Evaluator::hierarchical_allreduce(unsigned groups, const RingMembers& members, double bytes, int tp) const {
  const int n = static_cast<int>(nic_all_at_once_.size());
  const auto in = [&](int g) { return (groups & (1u << g)) != 0; };
  double within = 0;
  int fewest = std::numeric_limits<int>::max(), count = 0, participants = 0;
  for (int g = 0; g < n; ++g) {
    if (!in(g)) continue;
    const int local = members[g].local, nodes = (members[g].replicas + local - 1) / local;
    // Inside the group: among each node's replicas over its fabric and across its nodes on 1 / local
    // of the bytes per device. A ring moves its chunks over both kinds of link at once (NCCL's and
    // DiComm's rings are pipelined), so the slower kind sets the pace; every group at once, the
    // slowest group setting it for all.
    within = std::max({within, cost_.allreduce_time(cost_.intra_node_link(cluster().nodes[g]), bytes, local),
                       cost_.allreduce_time(nic_all_at_once_[g], bytes / local, nodes)});
    fewest = std::min(fewest, members[g].replicas);
    participants += members[g].replicas;
    ++count;
  }
  if (count == 1) return within;
  // Across groups (reduce-scattered inside, all-gathered after): each device's shard with its
  // counterparts in the other groups, over the slowest link among them; one ring per shard and
  // tensor-parallel index.
  const Link across = ring_link(groups, fewest * tp);
  const double sharded = within + cost_.allreduce_time(across, bytes / fewest, count);
  // Between sub-clusters a flat ring would cross the sites' link with every ring: never better.
  for (int g = 0; g < n; ++g)
    for (int h = 0; h < n; ++h)
      if (in(g) && in(h) && between_[g][h].inter_cluster != nullptr) return sharded;
  // Or one flat ring over every replica, whichever is faster (a group of few replicas leaves each
  // device a large shard): each node's NIC carries every ring that passes the node (devices_per_node
  // / local of them) with all of the bytes, staged as the ring's slowest pair; a ring's edge uses one
  // NIC at most.
  double flat = 0;
  for (int g = 0; g < n; ++g) {
    if (!in(g)) continue;
    Link nic = nic_all_at_once_[g];
    nic.bandwidth_gbps = std::min(nic_one_[g], nic.bandwidth_gbps * members[g].local);
    nic.latency_us = across.latency_us;
    nic.host_staged = across.host_staged;
    nic.host_link_gbps = across.host_link_gbps;
    flat = std::max({flat, cost_.allreduce_time(cost_.intra_node_link(cluster().nodes[g]), bytes, participants),
                     cost_.allreduce_time(nic, bytes, participants)});
  }
  return std::min(sharded, flat);
}

std::vector<std::vector<double>> Evaluator::dp_allreduce_times(const std::vector<PartitionedClass>& classes,
                                                               int bytes_per_value) const {
  if (bytes_per_value == 0) bytes_per_value = cost_.gradients().comm_bytes;
  std::vector<std::vector<double>> times;
  int replicas = 0;
  for (const PartitionedClass& c : classes) {
    replicas += c.layout.replicas;
    times.emplace_back(c.stages.size(), 0.0);
  }
  if (replicas <= 1) return times;
  // The segment of each stage of each class, where each stage's layers start (and one past the last
  // stage's end), and how many replicas of each segment share a node.
  std::vector<std::vector<size_t>> segment_of;
  std::vector<std::vector<int>> starts, local;
  for (const PartitionedClass& c : classes) {
    segment_of.emplace_back();
    for (size_t i = 0; i < c.layout.segments.size(); ++i)
      segment_of.back().insert(segment_of.back().end(), c.layout.segments[i].stages, i);
    starts.emplace_back(1, 0);
    for (const StageSpec& s : c.stages) starts.back().push_back(starts.back().back() + s.layers);
    local.emplace_back();
    for (size_t i = 0; i < c.layout.segments.size(); ++i) local.back().push_back(replicas_per_node(c.layout, i));
  }
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const PartitionedClass& c = classes[ci];
    int first_layer = 0;
    for (size_t k = 0; k < c.stages.size(); ++k) {
      const StageSpec& stage = c.stages[k];
      const int end_layer = first_layer + stage.layers;
      // Every replica's devices that hold any of these layers (or the same embedding / head): per
      // group (each is one class's), that class's replicas and how many of them share a node.
      unsigned groups = 0;
      RingMembers members{};
      int smallest_tp = stage.tp;
      for (size_t oi = 0; oi < classes.size(); ++oi) {
        const PartitionedClass& other = classes[oi];
        const auto add = [&](size_t j) {
          const StageSpec& s = other.stages[j];
          const auto g = s.nodes - cluster().nodes.data();
          groups |= 1u << g;
          smallest_tp = std::min(smallest_tp, s.tp);
          members[g] = {other.layout.replicas, local[oi][segment_of[oi][j]]};
        };
        // The stages whose layers overlap [first_layer, end_layer): from the first that ends after
        // first_layer while they start before end_layer (layers lie in stage order).
        const std::vector<int>& st = starts[oi];
        size_t j = static_cast<size_t>(std::upper_bound(st.begin() + 1, st.end(), first_layer) - (st.begin() + 1));
        for (; j < other.stages.size() && st[j] < end_layer; ++j) add(j);
        if (stage.first) add(0);                       // the embedding
        if (stage.last) add(other.stages.size() - 1);  // the head
      }
      // Each tensor-parallel index's ring carries its share of the blocks and the embedding and
      // head whole: HeteroPP does not cut them. Megatron-DeepSpeed does (a vocabulary-parallel
      // embedding and a column-parallel head).
      const double vocabulary_share = runtime_ == PipelineRuntime::deepspeed ? 1.0 / smallest_tp : 1.0;
      double parameters = stage.layers * cost_.layer_parameters() / smallest_tp;
      if (stage.first) parameters += cost_.embedding_parameters() * vocabulary_share;
      if (stage.last) parameters += cost_.embedding_parameters() * vocabulary_share;
      times[ci][k] = hierarchical_allreduce(groups, members, parameters * bytes_per_value, smallest_tp);
      first_layer = end_layer;
    }
  }
  return times;
}

std::vector<std::vector<double>> Evaluator::gradient_sum_times(const std::vector<PartitionedClass>& classes) const {
  std::vector<std::vector<double>> times = dp_allreduce_times(classes);
  if (cost_.distributed_optimizer())
    for (std::vector<double>& stages : times)
      for (double& t : stages) t /= 2;
  return times;
}

double Evaluator::dp_allreduce_time(const std::vector<PartitionedClass>& classes) const {
  return slowest(gradient_sum_times(classes));
}

double Evaluator::weight_gather_time(const std::vector<PartitionedClass>& classes) const {
  if (!cost_.distributed_optimizer()) return 0;
  // The weights travel in the model's dtype: a 16-bit model's holders round their slices first.
  return slowest(dp_allreduce_times(classes, cost_.model().dtype_bytes())) / 2;
}

double Evaluator::exposed_allreduce_time(const std::vector<PartitionedClass>& classes,
                                         const std::vector<PipelineTimes>& times) const {
  return exposed_allreduce_time(classes, times, gradient_sum_times(classes));
}

double Evaluator::weight_gather_time(const std::vector<PartitionedClass>& classes,
                                     const std::vector<std::vector<double>>& sums) const {
  // Where the sums move the weights' dtype the gather's allreduces are theirs (halved the same way).
  if (cost_.distributed_optimizer() && cost_.gradients().comm_bytes == cost_.model().dtype_bytes())
    return slowest(sums);
  return weight_gather_time(classes);
}

double Evaluator::after_pipeline_time(const std::vector<PartitionedClass>& classes,
                                      const std::vector<PipelineTimes>& times) const {
  const std::vector<std::vector<double>> sums = gradient_sum_times(classes);
  return exposed_allreduce_time(classes, times, sums) + optimizer_time(classes) + weight_gather_time(classes, sums);
}

double Evaluator::exposed_allreduce_time(const std::vector<PartitionedClass>& classes,
                                         const std::vector<PipelineTimes>& times,
                                         const std::vector<std::vector<double>>& sums) const {
  double exposed = 0;
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const PipelineTimes& t = times[ci];
    double before_end = 0;  // how long before the pipeline's end stage k's last backward pass ends
    for (size_t k = 0; k < classes[ci].stages.size(); ++k) {
      double left = sums[ci][k];
      if (cost_.gradients().overlap && left > 0) {
        // Layers finish one by one during the pass; the last layer's share waits for its end.
        const double layers = std::max(1, classes[ci].stages[k].layers);
        left = std::max(left / layers, left - t.backward[k] * (layers - 1) / layers);
      }
      exposed = std::max(exposed, left - before_end);
      before_end += t.backward[k] + (k < t.transfer.size() ? t.transfer[k] : 0.0);
    }
  }
  return exposed;
}

double Evaluator::optimizer_time(const std::vector<PartitionedClass>& classes) const {
  // Every device steps at once: those on a shared host share its cores.
  const double shared_slowdown = std::max(1.0, shared_host_load(classes));
  // Every class's pipeline holds every layer, and the distributed optimizer shards a layer over all
  // of its holders: the replicas of every class.
  const int holders = layer_holders(classes);
  double slowest = 0;
  for (const PartitionedClass& c : classes)
    for (StageSpec stage : c.stages) {
      stage.holders = holders;
      slowest = std::max(slowest, cost_.optimizer_time(stage) * (stage.nodes->on_shared_host ? shared_slowdown : 1));
    }
  return slowest;
}

std::vector<MicroBatchSplit> Evaluator::split_micro_batches(const std::vector<PipelineTimes>& times,
                                                            const std::vector<int>& replicas, int micro_batches) const {
  std::vector<PipelineEstimate> estimates;  // the period does not depend on the micro-batch count
  for (const PipelineTimes& t : times) estimates.push_back(pipeline_estimate(t));
  return split_micro_batches([&](size_t c, int m) { return estimates[c].at(m); }, replicas, micro_batches);
}

std::vector<MicroBatchSplit> Evaluator::split_micro_batches(const std::function<double(size_t, int)>& time,
                                                            const std::vector<int>& replicas, int micro_batches) {
  const size_t n = replicas.size();
  std::vector<MicroBatchSplit> split(n);
  int remaining = micro_batches;
  for (int r : replicas) remaining -= r;
  if (remaining < 0) return {};
  // Micro-batches go out in rounds (one more to every replica of a class) in the order of the time the
  // class would take with one more, `key(c, base)`; each class's keys grow with its base. One at a
  // time that took time and memory in proportion to the global batch (minutes at 10^7 samples), so
  // first every round whose key is below a threshold is given at once: the largest threshold below
  // which the rounds still fit, found by bisection; the few rounds left go one at a time as before.
  // Every replica starts with one (MicroBatchSplit's base 1); the round that takes class c from base b
  // to b + 1 has the key time(c, b + 1).
  const auto key = [&](size_t c, int64_t base) { return time(c, static_cast<int>(base + 1)); };
  const auto rounds_below = [&](size_t c, double threshold) {  // rounds of class c with a key below it
    int64_t low = 1, high = 2 + remaining / replicas[c];       // the first base whose key is not below
    while (low < high) {
      const int64_t mid = low + (high - low) / 2;
      if (key(c, mid) < threshold)
        low = mid + 1;
      else
        high = mid;
    }
    return low - 1;
  };
  const auto filled = [&](double threshold) {
    int64_t total = 0;
    for (size_t c = 0; c < n; ++c) total += rounds_below(c, threshold) * replicas[c];
    return total;
  };
  double low = -1, high = 0;
  for (size_t c = 0; c < n; ++c) high = std::max(high, key(c, 2 + remaining / replicas[c]) + 1);
  for (int i = 0; i < 200; ++i) {
    const double mid = low + (high - low) / 2;
    if (mid <= low || mid >= high) break;
    if (filled(mid) <= remaining)
      low = mid;
    else
      high = mid;
  }
  for (size_t c = 0; c < n; ++c) {
    const int64_t rounds = rounds_below(c, low);
    split[c].base += static_cast<int>(rounds);
    remaining -= static_cast<int>(rounds * replicas[c]);
  }
  // Next finishing time of each class's next replica to receive one more micro-batch.
  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> next;
  for (size_t c = 0; c < n; ++c) next.push({key(c, split[c].base), c});
  while (remaining > 0) {
    const size_t c = next.top().second;
    next.pop();
    const int moved = std::min(remaining, replicas[c] - split[c].extra);
    split[c].extra += moved;
    remaining -= moved;
    if (split[c].extra == replicas[c]) {
      ++split[c].base;
      split[c].extra = 0;
    }
    next.push({key(c, split[c].base), c});
  }
  return split;
}

Plan Evaluator::build_plan(const std::vector<PartitionedClass>& classes, const std::vector<MicroBatchSplit>& split,
                           int micro_batch) const {
  const Cluster& c = cluster();
  const Model& model = cost_.model();
  Plan plan;
  plan.cluster = c.name;
  plan.model = model;
  plan.micro_batch_size = micro_batch;
  plan.distributed_optimizer = cost_.distributed_optimizer();
  std::vector<int> cursor(c.nodes.size(), 0);  // next free device of each group
  auto take_device = [&](int group, int rank) {
    const int index = cursor[group]++;
    const int per_node = c.nodes[group].devices_per_node;
    int node = index / per_node;
    for (const auto& [name, count] : canonical_.members[group]) {
      if (node < count) return DeviceRef{name, node, index % per_node, rank};
      node -= count;
    }
    throw std::logic_error("plan uses more devices of group '" + c.nodes[group].name + "' than it has");
  };

  int rank = 0;
  double used_peak = 0;
  double busy = 0;
  int replica_stages = 0;  // stages over every replica, for the bubble
  struct Slowest {
    double time = -1;
    size_t pipeline = 0;
  } slowest;
  const StepParts parts = step_parts(classes, split, micro_batch);
  const std::vector<PipelineTimes>& class_times = parts.times;
  const std::vector<ClassSimulations>& sims = parts.sims;
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const PartitionedClass& pc = classes[ci];
    const PipelineTimes& times = class_times[ci];
    const int p = static_cast<int>(pc.stages.size());
    PlanPipeline pipeline;
    pipeline.transfer_s = times.transfer;
    int first_layer = 0;
    for (int k = 0; k < p; ++k) {
      const StageSpec& s = pc.stages[k];
      PlanStage stage;
      stage.node_group = s.nodes->name;
      stage.device_type = s.nodes->device_type;
      stage.tp = s.tp;
      stage.first_layer = first_layer;
      stage.layers = s.layers;
      stage.recompute = s.recompute;
      stage.forward_s = times.forward[k];
      stage.backward_s = times.backward[k];
      stage.memory_bytes = cost_.stage_memory(s, micro_batch, std::min(split[ci].most(), p - k));
      stage.capacity_bytes = cost_.device_capacity(s);
      first_layer += s.layers;
      pipeline.stages.push_back(stage);
    }
    const Simulation& base = sims[ci].base;
    const Simulation& more = sims[ci].more;
    for (int r = 0; r < pc.layout.replicas; ++r) {
      PlanReplica replica;
      const bool extra = r < split[ci].extra;
      const Simulation& sim = extra ? more : base;
      replica.micro_batches = extra ? split[ci].base + 1 : split[ci].base;
      replica.pipeline_time_s = sim.makespan;
      for (const Segment& segment : pc.layout.segments) {
        const DeviceType& type = c.device_type(c.nodes[segment.group].device_type);
        plan.prediction.cost_basis[type.name] = cost_.measured(type) != nullptr ? "measured (h2 profile)"
                                                : type.efficiency_calibrated()
                                                    ? "peak x efficiency fitted to a homogeneous run"
                                                    : "peak x efficiency";
        for (int k = 0; k < segment.stages; ++k) {
          std::vector<DeviceRef> devices;
          for (int t = 0; t < segment.tp; ++t) devices.push_back(take_device(segment.group, rank++));
          replica.devices.push_back(std::move(devices));
          used_peak += segment.tp * type.peak_tflops.at(model.dtype) * 1e12;
        }
      }
      for (double b : sim.busy) busy += b;
      replica_stages += p;
      if (sim.makespan > slowest.time) slowest = {sim.makespan, plan.pipelines.size()};
      plan.prediction.pipeline_time_s = std::max(plan.prediction.pipeline_time_s, sim.makespan);
      pipeline.replicas.push_back(std::move(replica));
    }
    pipeline.bubble_fraction = (split[ci].extra > 0 ? more : base).bubble_fraction;
    plan.pipelines.push_back(std::move(pipeline));
  }

  PlanPrediction& prediction = plan.prediction;
  const std::vector<std::vector<double>> sums = gradient_sum_times(classes);
  prediction.dp_allreduce_s = heteroauto::slowest(sums);  // the function, not the local of that name
  prediction.exposed_allreduce_s = exposed_allreduce_time(classes, class_times, sums);
  prediction.optimizer_s = optimizer_time(classes);
  prediction.weight_gather_s = weight_gather_time(classes, sums);
  prediction.step_time_s =
      prediction.pipeline_time_s + prediction.exposed_allreduce_s + prediction.optimizer_s + prediction.weight_gather_s;
  prediction.tokens_per_s = static_cast<double>(model.global_batch) * model.seq_len / prediction.step_time_s;
  prediction.mfu = cost_.step_flops() / (prediction.step_time_s * used_peak);
  prediction.bubble_fraction = 1 - busy / (replica_stages * prediction.pipeline_time_s);
  prediction.devices_used = rank;
  prediction.devices_total = c.device_count();

  // The bottleneck: the slowest stage of the slowest pipeline, or the gradient allreduce.
  const PlanPipeline& critical = plan.pipelines[slowest.pipeline];
  size_t worst = 0;
  for (size_t k = 1; k < critical.stages.size(); ++k)
    if (critical.stages[k].forward_s + critical.stages[k].backward_s >
        critical.stages[worst].forward_s + critical.stages[worst].backward_s)
      worst = k;
  const PlanStage& w = critical.stages[worst];
  std::string stage_words = "pipeline " + std::to_string(slowest.pipeline) + " stage " + std::to_string(worst) + " (" +
                            w.device_type + ", tp " + std::to_string(w.tp) + ", layers " +
                            std::to_string(w.first_layer) + "-" + std::to_string(w.first_layer + w.layers - 1) +
                            (w.recompute == Recompute::full ? ", recomputed" : "") + ") takes " +
                            milliseconds(w.forward_s + w.backward_s) + " per micro-batch";
  const double data_parallel = prediction.exposed_allreduce_s + prediction.weight_gather_s;
  if (data_parallel > 0.5 * prediction.pipeline_time_s)
    prediction.bottleneck =
        (prediction.weight_gather_s > 0 ? "data-parallel gradient reduce-scatter and weight gather: "
                                        : "data-parallel gradient allreduce: ") +
        milliseconds(data_parallel) + " exposed after a " + milliseconds(prediction.pipeline_time_s) + " pipeline; " +
        stage_words;
  else
    prediction.bottleneck = "compute: " + stage_words;
  if (const double load = shared_host_load(classes); load > 0)
    prediction.bottleneck += "; " + std::to_string(shared_host_devices(classes)) + " devices compute on the host's " +
                             count_text(c.shared_host->cores) + " shared cores";
  return plan;
}

std::vector<Evaluator::ClassSimulations> Evaluator::simulate_classes(const std::vector<PartitionedClass>& classes,
                                                                     const std::vector<PipelineTimes>& times,
                                                                     const std::vector<MicroBatchSplit>& split) const {
  std::vector<ClassSimulations> sims(classes.size());
  if (shared_host_load(classes) == 0) {
    for (size_t ci = 0; ci < classes.size(); ++ci) {
      sims[ci].base = simulate_step(times[ci], split[ci].base, schedule_);
      sims[ci].more = split[ci].extra > 0 ? simulate_step(times[ci], split[ci].base + 1, schedule_) : sims[ci].base;
    }
    return sims;
  }
  // Stages on the shared host slow each other down, across classes too: every class runs at once, its
  // replicas with base and with base + 1 micro-batches as two pipelines (identical replicas keep in
  // step, so each pipeline stands for its replicas with their demand summed; one that stands for none
  // is simulated without demand, slowing no one).
  const double threads = cluster().shared_host->threads_per_device;
  std::vector<SharedPipeline> pipelines;
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    const int replicas[2] = {classes[ci].layout.replicas - split[ci].extra, split[ci].extra};
    for (int more = 0; more < 2; ++more) {
      SharedPipeline pipeline{times[ci], split[ci].base + more, {}};
      for (const StageSpec& stage : classes[ci].stages)
        pipeline.demand.push_back(stage.nodes->on_shared_host ? stage.tp * threads * replicas[more] : 0);
      pipelines.push_back(std::move(pipeline));
    }
  }
  std::vector<Simulation> simulated = simulate_shared(pipelines, cluster().shared_host->cores, schedule_);
  for (size_t ci = 0; ci < classes.size(); ++ci) {
    sims[ci].base = std::move(simulated[2 * ci]);
    sims[ci].more = split[ci].extra > 0 ? std::move(simulated[2 * ci + 1]) : sims[ci].base;
  }
  return sims;
}

Evaluator::StepParts Evaluator::step_parts(const std::vector<PartitionedClass>& classes,
                                           const std::vector<MicroBatchSplit>& split, int micro_batch) const {
  StepParts parts;
  for (const PartitionedClass& pc : classes) parts.times.push_back(pipeline_times(pc, micro_batch));
  parts.sims = simulate_classes(classes, parts.times, split);
  return parts;
}

void Evaluator::update_step_parts(StepParts& parts, const std::vector<PartitionedClass>& classes,
                                  const std::vector<MicroBatchSplit>& split, int micro_batch, size_t ci) const {
  parts.times[ci] = pipeline_times(classes[ci], micro_batch);
  if (shared_host_load(classes) > 0) {
    parts.sims = simulate_classes(classes, parts.times, split);
    return;
  }
  parts.sims[ci].base = simulate_step(parts.times[ci], split[ci].base, schedule_);
  parts.sims[ci].more =
      split[ci].extra > 0 ? simulate_step(parts.times[ci], split[ci].base + 1, schedule_) : parts.sims[ci].base;
}

double Evaluator::step_time(const std::vector<PartitionedClass>& classes, const StepParts& parts) const {
  double pipeline = 0;
  for (const ClassSimulations& s : parts.sims) pipeline = std::max({pipeline, s.base.makespan, s.more.makespan});
  return pipeline + after_pipeline_time(classes, parts.times);
}

double Evaluator::shared_host_load(const std::vector<PartitionedClass>& classes) const {
  if (!cluster().shared_host) return 0;
  return shared_host_devices(classes) * cluster().shared_host->threads_per_device / cluster().shared_host->cores;
}

int Evaluator::shared_host_devices(const std::vector<PartitionedClass>& classes) const {
  int devices = 0;
  for (const PartitionedClass& c : classes)
    for (const StageSpec& stage : c.stages)
      if (stage.nodes->on_shared_host) devices += stage.tp * c.layout.replicas;
  return devices;
}

}  // namespace h2::heteroauto
