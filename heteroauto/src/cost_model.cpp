#include "h2/heteroauto/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace h2::heteroauto {

namespace {

// Per parameter, as HeteroPP holds it: the weights in the model dtype, an f32 gradient (it
// accumulates over micro-batches and is averaged across replicas in f32), an f32 master when the
// weights are 16-bit, and AdamW's two f32 moments: 2 + 4 + 4 + 8 = 18 bytes for 16-bit training
// (Megatron's count with fp32 gradient accumulation), 4 + 4 + 8 = 16 for f32.
double state_bytes_per_parameter(const Model& model) {
  const bool sixteen_bit = model.dtype_bytes() == 2;
  return model.dtype_bytes() + 4 + (sixteen_bit ? 4 : 0) + 8;
}
// Activation bytes per token per hidden unit of one layer with fused attention and no sequence
// parallelism, in 16-bit (Korthikanti et al., "Reducing activation recomputation").
constexpr double kActivationCoefficient = 34;
// Of those, what tensor parallelism without sequence parallelism cuts (attention and MLP inside):
// 10 b s h stay whole on every rank (the block's input, norms' outputs, residuals), 24 b s h / t.
constexpr double kActivationWhole = 10, kActivationCut = kActivationCoefficient - kActivationWhole;

double activation_coefficient(int tp) {
  return kActivationWhole + kActivationCut / tp;
}

double peak_flops(const DeviceType& d, const std::string& dtype) {
  auto it = d.peak_tflops.find(dtype);
  if (it == d.peak_tflops.end())
    throw DescriptionError("device type '" + d.name + "' has no peak_tflops for the model's dtype " + dtype);
  return it->second * 1e12;
}

}  // namespace

std::string format_memory(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (std::abs(bytes) >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

CostModel::CostModel(const Cluster& cluster, const Model& model, GradientSettings gradients)
    : cluster_(cluster),
      model_(model),
      gradients_(gradients),
      layer_parameters_(model.layer_parameters()),
      embedding_parameters_(model.embedding_parameters()) {
  for (const auto& g : cluster_.nodes) {
    const DeviceType& type = cluster_.device_type(g.device_type);
    const auto measured = type.measured.find(model_.name);
    group_facts_.push_back({&type, &cluster_.nic(g.nic), measured == type.measured.end() ? nullptr : &measured->second,
                            peak_flops(type, model_.dtype), cluster_.device_direct(type.vendor, type.vendor),
                            cluster_.collectives_direct(type.vendor, type.vendor)});
  }
}

CostModel::GroupFacts CostModel::facts_of(const NodeGroup& nodes) const {
  const size_t g = static_cast<size_t>(&nodes - cluster_.nodes.data());
  if (&nodes >= cluster_.nodes.data() && g < group_facts_.size()) return group_facts_[g];
  // A group of another description (a calibration run's nodes): looked up by name.
  const DeviceType& type = cluster_.device_type(nodes.device_type);
  return {&type,
          &cluster_.nic(nodes.nic),
          measured(type),
          peak_flops(type, model_.dtype),
          cluster_.device_direct(type.vendor, type.vendor),
          cluster_.collectives_direct(type.vendor, type.vendor)};
}

double CostModel::layer_forward_flops(int micro_batch) const {
  const double b = micro_batch, s = static_cast<double>(model_.seq_len), h = static_cast<double>(model_.hidden);
  return 2 * b * s * (layer_parameters() - 2 * h) + 4 * b * s * s * h;
}

double CostModel::head_forward_flops(int micro_batch) const {
  return 2.0 * micro_batch * static_cast<double>(model_.seq_len) * embedding_parameters();
}

double CostModel::step_flops() const {
  const int batch = static_cast<int>(model_.global_batch);
  return 3 * (model_.layers * layer_forward_flops(batch) + head_forward_flops(batch));
}

Link CostModel::intra_node_link(const NodeGroup& nodes) const {
  return {nodes.intra_node_bandwidth_gbps, nodes.intra_node_latency_us, false, 0};
}

Link CostModel::nic_link(const NodeGroup& nodes, int concurrent, Traffic traffic) const {
  const GroupFacts facts = facts_of(nodes);
  const NicType& nic = *facts.nic;
  const double share = std::min(1.0, static_cast<double>(nodes.nics_per_node) / std::max(1, concurrent));
  // Plain Ethernet (TCP) always goes through host memory; RDMA NICs read device memory only where
  // the description says the runtime lets them, for this kind of traffic.
  const bool direct = traffic == Traffic::collective ? facts.collectives_direct : facts.point_to_point_direct;
  const bool staged = nic.kind == NicKind::ethernet || !direct;
  return {nic.bandwidth_gbps * nic.efficiency * share, nic.latency_us, staged, facts.type->host_link_gbps};
}

Link CostModel::link_between(const StageSpec& a, const StageSpec& b, bool same_node, int senders, int receivers) const {
  if (same_node) return intra_node_link(*a.nodes);
  const Link la = nic_link(*a.nodes, senders, Traffic::point_to_point);
  const Link lb = nic_link(*b.nodes, receivers, Traffic::point_to_point);
  const GroupFacts fa = facts_of(*a.nodes), fb = facts_of(*b.nodes);
  const DeviceType &ta = *fa.type, &tb = *fb.type;
  const bool direct = &ta == &tb ? fa.point_to_point_direct : cluster_.device_direct(ta.vendor, tb.vendor);
  // Staged where either NIC is plain Ethernet or the pair's own fact says so (for two vendors, the
  // pair's, not each vendor's with itself).
  const bool ethernet = fa.nic->kind == NicKind::ethernet || fb.nic->kind == NicKind::ethernet;
  Link link{std::min(la.bandwidth_gbps, lb.bandwidth_gbps), std::max(la.latency_us, lb.latency_us), ethernet || !direct,
            std::min(ta.host_link_gbps, tb.host_link_gbps)};
  if (a.nodes->cluster != b.nodes->cluster) {
    const InterClusterLink* inter = cluster_.inter_cluster_link(a.nodes->cluster, b.nodes->cluster);
    const int crossing = std::max({1, senders, a.replicas * a.tp});
    link.bandwidth_gbps = std::min(link.bandwidth_gbps, inter->bandwidth_gbps / crossing);
    link.latency_us += inter->latency_us;
  }
  return link;
}

double CostModel::transfer_time(const Link& link, double bytes) const {
  double t = link.latency_us * 1e-6 + bytes * 8 / (link.bandwidth_gbps * 1e9);
  if (link.host_staged) t += 2 * bytes * 8 / (link.host_link_gbps * 1e9);  // device -> host, host -> device
  return t;
}

double CostModel::allreduce_time(const Link& link, double bytes, int participants) const {
  if (participants <= 1 || bytes <= 0) return 0;
  const double n = participants;
  double t = 2 * (n - 1) * link.latency_us * 1e-6 + 2 * (n - 1) / n * bytes * 8 / (link.bandwidth_gbps * 1e9);
  if (link.host_staged) t += 2 * bytes * 8 / (link.host_link_gbps * 1e9);
  return t;
}

double CostModel::boundary_bytes(int micro_batch) const {
  return static_cast<double>(micro_batch) * static_cast<double>(model_.seq_len) * static_cast<double>(model_.hidden) *
         model_.dtype_bytes();
}

const MeasuredProfile* CostModel::measured(const DeviceType& type) const {
  const auto it = type.measured.find(model_.name);
  return it == type.measured.end() ? nullptr : &it->second;
}

bool CostModel::measured_at(const std::vector<MeasuredTime>& points, int tp) {
  return std::any_of(points.begin(), points.end(), [&](const MeasuredTime& p) { return p.tp == tp; });
}

StageTime CostModel::fixed_time(const std::vector<MeasuredTime>& points, double fixed_share, int tp) {
  for (const MeasuredTime& p : points)  // ascending (tp, micro-batch): the first of the degree is its smallest
    if (p.tp == tp) return {fixed_share * p.forward_ms * 1e-3, fixed_share * p.backward_ms * 1e-3};
  return {};
}

StageTime CostModel::measured_time(const std::vector<MeasuredTime>& points, int micro_batch, int tp,
                                   double fixed_share) {
  if (tp > 1 && measured_at(points, 1)) {
    int largest = 0;
    for (const MeasuredTime& p : points)
      if (p.tp == tp) largest = std::max(largest, p.micro_batch);
    if (largest > 0 && micro_batch > largest) {
      StageTime t = measured_time(points, largest, tp);
      const StageTime from = measured_time(points, largest, 1, fixed_share),
                      to = measured_time(points, micro_batch, 1, fixed_share);
      t.forward += (to.forward - from.forward) / tp;
      t.backward += (to.backward - from.backward) / tp;
      return t;
    }
  }
  // Between two measured sizes: linear between them; outside: the fixed part plus the rest of the
  // nearest one in proportion.
  const double b = micro_batch;
  const MeasuredTime* below = nullptr;
  const MeasuredTime* above = nullptr;
  for (const MeasuredTime& p : points) {
    if (p.tp != tp) continue;
    if (p.micro_batch <= micro_batch) below = &p;
    if (p.micro_batch >= micro_batch && above == nullptr) above = &p;
  }
  StageTime t;
  if (below == nullptr && above == nullptr) return t;
  if (below != nullptr && above != nullptr && below != above) {
    const double w = (b - below->micro_batch) / (above->micro_batch - below->micro_batch);
    t.forward = (1 - w) * below->forward_ms + w * above->forward_ms;
    t.backward = (1 - w) * below->backward_ms + w * above->backward_ms;
  } else {
    const MeasuredTime& nearest = below != nullptr ? *below : *above;
    // The fixed part, in ms, never more than the nearest point's whole pass (a profile whose time
    // falls with the micro-batch would otherwise scale a negative rest).
    const StageTime fixed = fixed_time(points, fixed_share, tp);
    const double fixed_forward = std::min(fixed.forward * 1e3, nearest.forward_ms),
                 fixed_backward = std::min(fixed.backward * 1e3, nearest.backward_ms);
    t.forward = fixed_forward + (nearest.forward_ms - fixed_forward) * b / nearest.micro_batch;
    t.backward = fixed_backward + (nearest.backward_ms - fixed_backward) * b / nearest.micro_batch;
  }
  t.forward *= 1e-3;
  t.backward *= 1e-3;
  return t;
}

StageTime CostModel::stage_time(const StageSpec& stage, int micro_batch) const {
  const GroupFacts facts = facts_of(*stage.nodes);
  const DeviceType& type = *facts.type;
  const MeasuredProfile* profile = facts.profile;
  const double tp = stage.tp;
  double layer_forward;
  double layer_backward;
  // Measured at the stage's degree: one rank's time, its allreduces included; else at degree 1, cut.
  const bool measured_at_tp = profile != nullptr && stage.tp > 1 && measured_at(profile->layer, stage.tp);
  const int profile_tp = measured_at_tp ? stage.tp : 1;
  const double fixed_share = profile != nullptr ? profile->fixed_share : 0;
  if (measured_at_tp) {
    const StageTime layer = measured_time(profile->layer, micro_batch, stage.tp, fixed_share);
    layer_forward = layer.forward;
    layer_backward = layer.backward;
  } else if (profile != nullptr) {
    // The fixed part of each pass stays whole on every rank; the rest is cut.
    const StageTime layer = measured_time(profile->layer, micro_batch, 1, fixed_share);
    const StageTime fixed = fixed_time(profile->layer, fixed_share);
    layer_forward = fixed.forward + (layer.forward - fixed.forward) / tp;
    layer_backward = fixed.backward + (layer.backward - fixed.backward) / tp;
  } else {
    const double rate = facts.peak_flops * type.efficiency * tp;
    layer_forward = layer_forward_flops(micro_batch) / rate;
    layer_backward = 2 * layer_forward;
  }
  const double recomputed_forward = layer_forward;
  // Megatron tensor parallelism: two allreduces of the layer's output in the forward, two in the
  // backward (two more when the forward is recomputed).
  const double tp_allreduce =
      measured_at_tp ? 0 : allreduce_time(intra_node_link(*stage.nodes), boundary_bytes(micro_batch), stage.tp);
  layer_forward += 2 * tp_allreduce;
  layer_backward += 2 * tp_allreduce;
  if (stage.recompute == Recompute::full) layer_backward += recomputed_forward + 2 * tp_allreduce;

  StageTime t{stage.layers * layer_forward, stage.layers * layer_backward};
  if (stage.first && profile != nullptr && !profile->embedding.empty()) {
    const StageTime embedding = measured_time(
        profile->embedding, micro_batch, measured_at(profile->embedding, profile_tp) ? profile_tp : 1, fixed_share);
    t.forward += embedding.forward;
    t.backward += embedding.backward;
  }
  if (stage.last) {
    if (profile != nullptr && !profile->head.empty()) {
      // Whole on every tensor-parallel rank (HeteroPP does not cut the vocabulary).
      const StageTime head = measured_time(profile->head, micro_batch,
                                           measured_at(profile->head, profile_tp) ? profile_tp : 1, fixed_share);
      t.forward += head.forward;
      t.backward += head.backward;
    } else {
      // Without a measured head: its FLOPs at the layers' measured rate on one device, or at peak x
      // efficiency.
      const double head = profile != nullptr ? measured_time(profile->layer, micro_batch, 1, fixed_share).forward *
                                                   head_forward_flops(1) / layer_forward_flops(1)
                                             : head_forward_flops(micro_batch) / (facts.peak_flops * type.efficiency);
      t.forward += head;
      t.backward += 2 * head;
    }
  }
  return t;
}

double CostModel::optimizer_time(const StageSpec& stage) const {
  const MeasuredProfile* profile = facts_of(*stage.nodes).profile;
  if (profile == nullptr) return 0;
  // The distributed optimizer takes the norm and the update of 1/replicas of the parameters; the
  // zeroing of the gradients stays whole.
  const double shards = gradients_.distributed_optimizer ? stage.shards() : 1;
  const double saved = profile->update_ns_per_parameter * (1 - 1 / shards);
  return device_parameters(stage) * (profile->optimizer_ns_per_parameter - saved) * 1e-9;
}

double CostModel::stage_parameters(const StageSpec& stage) const {
  double parameters = stage.layers * layer_parameters();
  if (stage.first) parameters += embedding_parameters();
  if (stage.last) parameters += embedding_parameters() + static_cast<double>(model_.hidden);
  return parameters;
}

double CostModel::device_parameters(const StageSpec& stage) const {
  const double blocks = stage.layers * layer_parameters();
  return stage_parameters(stage) - blocks + blocks / stage.tp;
}

double CostModel::parameter_state_bytes(const StageSpec& stage) const {
  // A distributed optimizer keeps 1 / shards of AdamW's two f32 moments and of the f32 masters of
  // 16-bit weights (an f32 weight is its own master, which every replica needs).
  const double sharded = 8 + (model_.dtype_bytes() == 2 ? 4 : 0);
  const double per_parameter =
      state_bytes_per_parameter(model_) - sharded + sharded / (gradients_.distributed_optimizer ? stage.shards() : 1);
  return device_parameters(stage) * per_parameter;
}

double CostModel::activation_bytes_per_layer(const StageSpec& stage, int micro_batch) const {
  const double tokens_hidden =
      static_cast<double>(micro_batch) * static_cast<double>(model_.seq_len) * static_cast<double>(model_.hidden);
  const double width = model_.dtype_bytes() / 2.0;
  if (stage.recompute == Recompute::full) return 2 * tokens_hidden * width;  // the layer's input only
  return activation_coefficient(stage.tp) * tokens_hidden * width;
}

double CostModel::stage_memory(const StageSpec& stage, int micro_batch, int in_flight) const {
  const double tokens = static_cast<double>(micro_batch) * static_cast<double>(model_.seq_len);
  double bytes = parameter_state_bytes(stage);
  bytes += in_flight * stage.layers * activation_bytes_per_layer(stage, micro_batch);
  // Recomputing a layer materialises its full activations once more, one layer at a time.
  if (stage.recompute == Recompute::full)
    bytes += activation_coefficient(stage.tp) * tokens * static_cast<double>(model_.hidden) * model_.dtype_bytes() / 2;
  if (stage.first) bytes += in_flight * tokens * static_cast<double>(model_.hidden) * model_.dtype_bytes();
  // Logits in the model dtype plus their fp32 softmax for the loss, one micro-batch at a time, whole
  // on every tensor-parallel rank.
  if (stage.last) bytes += tokens * static_cast<double>(model_.vocab) * (model_.dtype_bytes() + 4);
  return bytes;
}

double CostModel::device_capacity(const StageSpec& stage) const {
  const DeviceType& type = *facts_of(*stage.nodes).type;
  return (type.memory_gib - type.runtime_overhead_gib) * kGiB;
}

}  // namespace h2::heteroauto
