#include "h2/heteroauto/description.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include "json_reader.hpp"

namespace h2::heteroauto {

namespace {

const std::set<std::string> kDtypes{"bf16", "f16", "f32"};

// The ranges of the fields: far beyond any real device, cluster or model, and within what the
// planner's arithmetic and the runtime's int fields hold.
constexpr double kMinTflops = 1e-6, kMaxTflops = 1e6;              // per device
constexpr double kMinMemoryGib = 1.0 / 1024, kMaxMemoryGib = 1e6;  // 1 MiB to 1 PiB per device
constexpr double kMinGbps = 1e-3, kMaxGbps = 1e7;                  // 1 Mbit/s to 10 Pbit/s
constexpr double kMinMs = 1e-6, kMaxMs = 1e7;                      // measured layer times
constexpr int64_t kMaxNodes = 1 << 20, kMaxPerNode = 1024, kMaxDevices = 1 << 24;
constexpr int64_t kMaxLayers = 1 << 16, kMaxWidth = 1 << 22, kMaxHeads = 1 << 16;
constexpr int64_t kMaxSeqLen = 1 << 24, kMaxVocab = 1 << 24, kMaxMicroBatch = 1 << 20;
constexpr int64_t kMaxGlobalBatch = 1 << 30;  // samples; the micro-batch count is an int

// What NICs achieve of their line rate in training traffic when a description does not say
// (docs/heteroauto-cost-model.md, "NIC kinds", gives the measurements behind them): InfiniBand's
// credit-based flow control keeps large transfers near line rate; RoCE over lossy-tuned Ethernet
// loses to congestion control and retransmission; TCP pays the kernel's copies and a socket per flow.
constexpr double kInfinibandEfficiency = 0.9, kRoceEfficiency = 0.75, kEthernetEfficiency = 0.5;

template <typename Item>
void check_unique(const std::vector<Item>& items, const std::string& what) {
  std::set<std::string> names;
  for (size_t i = 0; i < items.size(); ++i)
    if (!names.insert(items[i].name).second)
      throw DescriptionError(what + "[" + std::to_string(i) + "].name: '" + items[i].name + "' is used twice");
}

// [{"micro_batch": 1, "forward_ms": 12.6, "backward_ms": 24.9}, ...], in ascending micro-batch sizes,
// optionally per tensor-parallel degree ("tp", default 1; degrees ascending, sizes ascending within one).
std::vector<MeasuredTime> parse_measured_times(JsonReader& r, const std::string& key, bool required) {
  std::vector<MeasuredTime> times;
  r.array(key, required, false, [&](const nlohmann::json& j, const std::string& path) {
    JsonReader tr(j, path);
    MeasuredTime t;
    t.micro_batch = static_cast<int>(tr.required_integer("micro_batch", 1, kMaxMicroBatch));
    t.forward_ms = tr.required_number("forward_ms", kMinMs, kMaxMs);
    t.backward_ms = tr.required_number("backward_ms", kMinMs, kMaxMs);
    t.tp = static_cast<int>(tr.optional_integer("tp", 1, 1, kMaxPerNode));
    tr.reject_unknown();
    if (!times.empty() && t.tp < times.back().tp)
      tr.fail("tp", "must not be smaller than the previous entry's (" + std::to_string(times.back().tp) +
                        "): list tensor-parallel degrees in ascending order");
    if (!times.empty() && t.tp == times.back().tp && t.micro_batch <= times.back().micro_batch)
      tr.fail("micro_batch", "must be larger than the previous entry's (" + std::to_string(times.back().micro_batch) +
                                 "): list micro-batch sizes in ascending order");
    times.push_back(t);
  });
  if (!times.empty() && times.front().tp != 1)
    throw DescriptionError(r.path_of(key) + ": needs points at tp 1 (stages of other degrees fall back to them)");
  return times;
}

MeasuredProfile parse_measured_profile(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  MeasuredProfile p;
  p.layer = parse_measured_times(r, "layer", true);
  p.embedding = parse_measured_times(r, "embedding", false);
  p.head = parse_measured_times(r, "head", false);
  p.optimizer_ns_per_parameter = r.number("optimizer_ns_per_parameter", 0, 0, 1e9);
  p.update_ns_per_parameter = r.number("update_ns_per_parameter", 0, 0, 1e9);
  if (p.update_ns_per_parameter > p.optimizer_ns_per_parameter)
    r.fail("update_ns_per_parameter", "must not exceed optimizer_ns_per_parameter, of which it is a part");
  p.fixed_share = r.number("fixed_share", 0, 0, 0.95);
  p.spread = r.number("spread", 0, 0, 1e6);
  p.repeats = static_cast<int>(r.optional_integer("repeats", 0, 0, 1 << 20));
  p.uncertainty = r.number("uncertainty", 0, 0, 1e6);
  r.reject_unknown();
  return p;
}

// The fields of a node group after its name and type; the NIC is checked against `c`'s when it has any.
void parse_node_shape(JsonReader& nr, const Cluster& c, NodeGroup& g) {
  g.count = static_cast<int>(nr.required_integer("count", 1, kMaxNodes));
  g.devices_per_node = static_cast<int>(nr.required_integer("devices_per_node", 1, kMaxPerNode));
  if (static_cast<int64_t>(g.count) * g.devices_per_node > kMaxDevices)
    nr.fail("count", "times devices_per_node is " + std::to_string(static_cast<int64_t>(g.count) * g.devices_per_node) +
                         " devices, more than " + std::to_string(kMaxDevices));
  g.intra_node_bandwidth_gbps = nr.required_number("intra_node_bandwidth_gbps", kMinGbps, kMaxGbps);
  g.intra_node_latency_us = nr.number("intra_node_latency_us", 2, 0, 1e7);
  g.nic = nr.string("nic");
  if (!c.nics.empty() && std::none_of(c.nics.begin(), c.nics.end(), [&](auto& n) { return n.name == g.nic; }))
    nr.fail("nic", "'" + g.nic + "' is not one of nic_types");
  g.nics_per_node = static_cast<int>(nr.optional_integer("nics_per_node", 1, 1, kMaxPerNode));
}

// {"source", "model": {...}, "nodes": {count, devices_per_node, ...}, "layout": {"tp", "pp",
// "micro_batch", "recompute"}, "step_time_s"}: a homogeneous run of the type `type_name`.
Calibration parse_calibration(const nlohmann::json& j, const std::string& path, const std::string& type_name) {
  JsonReader r(j, path);
  Calibration k;
  k.path = path;
  k.source = r.string("source");
  k.model = parse_model_at(r.required("model"), r.path_of("model"));
  JsonReader nr(r.required("nodes"), r.path_of("nodes"));
  k.nodes.name = "calibration";
  k.nodes.device_type = type_name;
  parse_node_shape(nr, Cluster{}, k.nodes);
  k.nodes.cluster = "default";
  nr.reject_unknown();
  JsonReader lr(r.required("layout"), r.path_of("layout"));
  k.tp = static_cast<int>(lr.optional_integer("tp", 1, 1, kMaxPerNode));
  k.pp = static_cast<int>(lr.optional_integer("pp", 1, 1, k.model.layers));
  k.micro_batch = static_cast<int>(lr.optional_integer("micro_batch", 1, 1, k.model.global_batch));
  const std::string recompute = lr.string("recompute", "none");
  if (recompute != "none" && recompute != "full")
    lr.fail("recompute", "must be \"none\" or \"full\" (got '" + recompute + "')");
  k.recompute = recompute == "full" ? Recompute::full : Recompute::none;
  const std::string grad_dtype = lr.string("grad_comm_dtype", "f32");
  if (!kDtypes.count(grad_dtype)) lr.fail("grad_comm_dtype", "must be f32, bf16 or f16 (got '" + grad_dtype + "')");
  k.grad_comm_bytes = grad_dtype == "f32" ? 4 : 2;
  if (const nlohmann::json* overlap = lr.optional("overlap_grad_reduce")) {
    if (!overlap->is_boolean()) lr.fail("overlap_grad_reduce", "must be true or false");
    k.overlap_grad_reduce = overlap->get<bool>();
  }
  if (const nlohmann::json* sharded = lr.optional("distributed_optimizer")) {
    if (!sharded->is_boolean()) lr.fail("distributed_optimizer", "must be true or false");
    k.distributed_optimizer = sharded->get<bool>();
  }
  lr.reject_unknown();
  const int64_t devices = static_cast<int64_t>(k.nodes.count) * k.nodes.devices_per_node;
  if (devices % (k.tp * k.pp) != 0)
    lr.fail("tp", "times pp (" + std::to_string(k.tp * k.pp) + ") must divide the nodes' " + std::to_string(devices) +
                      " devices");
  const int64_t dp = devices / (k.tp * k.pp);
  if (k.model.global_batch % (dp * k.micro_batch) != 0)
    lr.fail("micro_batch", "times the " + std::to_string(dp) +
                               " data-parallel replicas must divide the model's global_batch (" +
                               std::to_string(k.model.global_batch) + ")");
  if (k.nodes.devices_per_node % k.tp != 0)
    lr.fail("tp", "must divide the nodes' devices_per_node (" + std::to_string(k.nodes.devices_per_node) + ")");
  k.step_time_s = r.required_number("step_time_s", 1e-9, 1e9);
  r.reject_unknown();
  return k;
}

DeviceType parse_device_type(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  DeviceType d;
  d.name = r.string("name");
  d.vendor = r.string("vendor");
  d.plugin = r.string("plugin", "");
  const nlohmann::json& peaks = r.required("peak_tflops");
  if (!peaks.is_object() || peaks.empty()) r.fail("peak_tflops", "must be an object like {\"bf16\": 312}");
  JsonReader peak_reader(peaks, r.path_of("peak_tflops"));
  for (const auto& [dtype, value] : peaks.items()) {
    if (!kDtypes.count(dtype)) peak_reader.fail(dtype, "is not a dtype (bf16, f16 or f32)");
    d.peak_tflops[dtype] = peak_reader.required_number(dtype, kMinTflops, kMaxTflops);
  }
  d.memory_gib = r.required_number("memory_gib", kMinMemoryGib, kMaxMemoryGib);
  d.efficiency = r.number("efficiency", 0.5, 1e-3, 1);
  if (const nlohmann::json* calibration = r.optional("calibrated_from")) {
    const std::string at = r.path_of("calibrated_from");
    if (calibration->is_array()) {
      if (calibration->empty()) r.fail("calibrated_from", "must hold at least one run");
      for (size_t i = 0; i < calibration->size(); ++i)
        d.calibrated_from.push_back(parse_calibration(calibration->at(i), at + "[" + std::to_string(i) + "]", d.name));
    } else {
      d.calibrated_from.push_back(parse_calibration(*calibration, at, d.name));
    }
  }
  d.runtime_overhead_gib = r.number("runtime_overhead_gib", 1, 0, d.memory_gib);
  d.host_link_gbps = r.number("host_link_gbps", 200, kMinGbps, kMaxGbps);
  if (const nlohmann::json* measured = r.optional("measured")) {
    if (!measured->is_object()) r.fail("measured", "must be an object of model name -> profile");
    for (const auto& [model, profile] : measured->items())
      d.measured[model] = parse_measured_profile(profile, r.path_of("measured") + "." + model);
  }
  // A run of a model without a measured profile fits the efficiency, which must then not be given.
  if (j.contains("efficiency") && d.efficiency_calibrated())
    r.fail("calibrated_from", "and efficiency both say how fast the type is: give one of them");
  r.reject_unknown();
  return d;
}

NicKind parse_nic_kind(JsonReader& r) {
  const std::string kind = r.string("type");
  if (kind == "infiniband") return NicKind::infiniband;
  if (kind == "roce") return NicKind::roce;
  if (kind == "ethernet") return NicKind::ethernet;
  r.fail("type", "must be infiniband, roce or ethernet (got '" + kind + "')");
}

}  // namespace

double default_nic_efficiency(NicKind kind) {
  switch (kind) {
    case NicKind::infiniband: return kInfinibandEfficiency;
    case NicKind::roce: return kRoceEfficiency;
    default: return kEthernetEfficiency;
  }
}

std::string to_string(NicKind kind) {
  switch (kind) {
    case NicKind::infiniband: return "infiniband";
    case NicKind::roce: return "roce";
    default: return "ethernet";
  }
}

std::string to_string(Recompute recompute) {
  return recompute == Recompute::full ? "full" : "none";
}

Cluster parse_cluster(const nlohmann::json& json) {
  JsonReader r(json, "");
  Cluster c;
  c.name = r.string("name", "cluster");
  r.array("device_types", true, false,
          [&](const nlohmann::json& j, const std::string& p) { c.device_types.push_back(parse_device_type(j, p)); });
  check_unique(c.device_types, "device_types");
  r.array("nic_types", true, false, [&](const nlohmann::json& j, const std::string& p) {
    JsonReader nr(j, p);
    NicType n;
    n.name = nr.string("name");
    n.kind = parse_nic_kind(nr);
    n.bandwidth_gbps = nr.required_number("bandwidth_gbps", kMinGbps, kMaxGbps);
    n.latency_us = nr.number("latency_us", 5, 0, 1e7);
    n.efficiency = nr.number("efficiency", default_nic_efficiency(n.kind), 0.01, 1);
    nr.reject_unknown();
    c.nics.push_back(n);
  });
  check_unique(c.nics, "nic_types");
  r.array("nodes", true, false, [&](const nlohmann::json& j, const std::string& p) {
    JsonReader nr(j, p);
    NodeGroup g;
    g.name = nr.string("name");
    g.device_type = nr.string("device_type");
    if (std::none_of(c.device_types.begin(), c.device_types.end(), [&](auto& d) { return d.name == g.device_type; }))
      nr.fail("device_type", "'" + g.device_type + "' is not one of device_types");
    parse_node_shape(nr, c, g);
    g.cluster = nr.string("cluster", "default");
    nr.reject_unknown();
    c.nodes.push_back(g);
  });
  // A calibration's nodes name one of the NIC types, known only now.
  for (size_t i = 0; i < c.device_types.size(); ++i) {
    const std::vector<Calibration>& runs = c.device_types[i].calibrated_from;
    for (size_t k = 0; k < runs.size(); ++k)
      if (std::none_of(c.nics.begin(), c.nics.end(), [&](auto& n) { return n.name == runs[k].nodes.nic; }))
        throw DescriptionError(runs[k].path + ".nodes.nic: '" + runs[k].nodes.nic + "' is not one of nic_types");
  }
  check_unique(c.nodes, "nodes");
  int64_t devices = 0;
  for (const NodeGroup& g : c.nodes) devices += static_cast<int64_t>(g.count) * g.devices_per_node;
  if (devices > kMaxDevices)
    throw DescriptionError("nodes: " + std::to_string(devices) + " devices in all, more than " +
                           std::to_string(kMaxDevices));
  std::set<std::string> clusters;
  for (const auto& g : c.nodes) clusters.insert(g.cluster);
  r.array("inter_cluster_links", false, true, [&](const nlohmann::json& j, const std::string& p) {
    JsonReader lr(j, p);
    const nlohmann::json& between = lr.required("between");
    if (!between.is_array() || between.size() != 2 || !between[0].is_string() || !between[1].is_string())
      lr.fail("between", "must be two cluster names");
    InterClusterLink l{between[0].get<std::string>(), between[1].get<std::string>()};
    for (const std::string& name : {l.a, l.b})
      if (!clusters.count(name)) lr.fail("between", "'" + name + "' is not the cluster of any nodes entry");
    l.bandwidth_gbps = lr.required_number("bandwidth_gbps", kMinGbps, kMaxGbps);
    l.latency_us = lr.number("latency_us", 50, 0, 1e8);
    lr.reject_unknown();
    c.inter_cluster_links.push_back(l);
  });
  for (const std::string& a : clusters)
    for (const std::string& b : clusters)
      if (a < b && c.inter_cluster_link(a, b) == nullptr)
        throw DescriptionError("inter_cluster_links: no link between clusters '" + a + "' and '" + b + "'");
  // A vendor no device type has would match nothing, silently: a misspelt "Nvidia" would stage
  // every transfer of a cluster its author believes device-direct.
  const auto vendor = [&](const nlohmann::json& j, const std::string& p) {
    const std::string name = j.get<std::string>();
    if (std::none_of(c.device_types.begin(), c.device_types.end(), [&](auto& d) { return d.vendor == name; }))
      throw DescriptionError(p + ": '" + name + "' is not the vendor of any of device_types");
    return name;
  };
  r.array("device_direct_rdma", false, true, [&](const nlohmann::json& j, const std::string& p) {
    if (!j.is_array() || j.size() != 2 || !j[0].is_string() || !j[1].is_string())
      throw DescriptionError(p + ": must be a pair of vendor names, like [\"NVIDIA\", \"NVIDIA\"]");
    c.device_direct_rdma.emplace_back(vendor(j[0], p + "[0]"), vendor(j[1], p + "[1]"));
  });
  if (r.optional("device_direct_collectives") != nullptr) {
    c.device_direct_collectives.emplace();
    r.array("device_direct_collectives", false, true, [&](const nlohmann::json& j, const std::string& p) {
      if (!j.is_string()) throw DescriptionError(p + ": must be a vendor name, like \"NVIDIA\"");
      c.device_direct_collectives->push_back(vendor(j, p));
    });
  }
  if (const nlohmann::json* shared = r.optional("shared_host")) {
    JsonReader sr(*shared, r.path_of("shared_host"));
    SharedHost host;
    host.cores = sr.required_number("cores", 1, 1e6);
    host.threads_per_device = sr.number("threads_per_device", 1, 1, 1e6);
    sr.array("node_groups", true, false, [&](const nlohmann::json& j, const std::string& p) {
      if (!j.is_string()) throw DescriptionError(p + ": must be the name of a nodes entry");
      const std::string name = j.get<std::string>();
      const auto group = std::find_if(c.nodes.begin(), c.nodes.end(), [&](auto& g) { return g.name == name; });
      if (group == c.nodes.end()) throw DescriptionError(p + ": '" + name + "' is not one of nodes");
      if (group->on_shared_host) throw DescriptionError(p + ": '" + name + "' is named twice");
      group->on_shared_host = true;
      host.node_groups.push_back(name);
    });
    sr.reject_unknown();
    c.shared_host = std::move(host);
  }
  r.reject_unknown();
  return c;
}

Model parse_model(const nlohmann::json& json) {
  return parse_model_at(json, "");
}

Model parse_model_at(const nlohmann::json& json, const std::string& path) {
  JsonReader r(json, path);
  Model m;
  m.name = r.string("name", "model");
  m.layers = static_cast<int>(r.required_integer("layers", 1, kMaxLayers));
  m.hidden = r.required_integer("hidden", 1, kMaxWidth);
  m.heads = r.required_integer("heads", 1, kMaxHeads);
  m.kv_heads = r.optional_integer("kv_heads", m.heads, 1, kMaxHeads);
  m.ffn = r.optional_integer("ffn", 4 * m.hidden, 1, 4 * kMaxWidth);
  m.seq_len = r.required_integer("seq_len", 1, kMaxSeqLen);
  m.vocab = r.required_integer("vocab", 1, kMaxVocab);
  m.global_batch = r.required_integer("global_batch", 1, kMaxGlobalBatch);
  if (m.hidden % m.heads != 0) r.fail("heads", "must divide hidden (" + std::to_string(m.hidden) + ")");
  if (m.heads % m.kv_heads != 0) r.fail("kv_heads", "must divide heads (" + std::to_string(m.heads) + ")");
  m.micro_batch_sizes.clear();
  r.array("micro_batch_sizes", false, false, [&](const nlohmann::json& j, const std::string& p) {
    if (!j.is_number_integer() || j.get<int64_t>() < 1 || j.get<int64_t>() > kMaxMicroBatch)
      throw DescriptionError(p + ": must be an integer in [1, " + std::to_string(kMaxMicroBatch) + "]");
    if (j.get<int64_t>() > m.global_batch) throw DescriptionError(p + ": is larger than global_batch");
    m.micro_batch_sizes.push_back(j.get<int>());
  });
  if (m.micro_batch_sizes.empty()) m.micro_batch_sizes = {1};
  m.dtype = r.string("dtype", "bf16");
  if (!kDtypes.count(m.dtype)) r.fail("dtype", "must be bf16, f16 or f32 (got '" + m.dtype + "')");
  m.optimizer = r.string("optimizer", "adamw");
  if (m.optimizer != "adamw") r.fail("optimizer", "only adamw is modelled (got '" + m.optimizer + "')");
  const std::string mlp = r.string("mlp", "gelu");
  if (mlp != "gelu" && mlp != "swiglu") r.fail("mlp", "must be gelu or swiglu (got '" + mlp + "')");
  m.mlp = mlp == "swiglu" ? Mlp::swiglu : Mlp::gelu;
  const std::string norm = r.string("norm", "rms_norm");
  if (norm != "rms_norm" && norm != "layer_norm") r.fail("norm", "must be rms_norm or layer_norm (got '" + norm + "')");
  m.norm = norm == "layer_norm" ? Norm::layer_norm : Norm::rms_norm;
  if (r.optional("recompute")) m.recompute.clear();
  r.array("recompute", false, false, [&](const nlohmann::json& j, const std::string& p) {
    if (j == "none")
      m.recompute.push_back(Recompute::none);
    else if (j == "full")
      m.recompute.push_back(Recompute::full);
    else
      throw DescriptionError(p + ": must be \"none\" or \"full\" (got " + brief_json(j) + ")");
  });
  r.reject_unknown();
  return m;
}

nlohmann::json parse_json_bounded(std::istream& in) {
  return nlohmann::json::parse(in, [](int depth, nlohmann::json::parse_event_t, const nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      throw std::length_error("nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    return true;
  });
}

std::string brief_json(const nlohmann::json& value, size_t max_chars) {
  std::string text = value.dump();
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

nlohmann::json read_json_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw DescriptionError(std::string(what) + " " + path + ": cannot be read");
  try {
    return parse_json_bounded(in);
  } catch (const nlohmann::json::exception& e) {  // a parse error, or a number beyond a double (2E516)
    throw DescriptionError(std::string(what) + " " + path + ": not valid JSON: " + e.what());
  } catch (const std::length_error& e) {
    throw DescriptionError(std::string(what) + " " + path + ": refused: " + e.what());
  }
}

Cluster load_cluster(const std::string& path) {
  try {
    return parse_cluster(read_json_file(path, "cluster"));
  } catch (const DescriptionError& e) {
    const std::string message = e.what();
    throw DescriptionError(message.starts_with("cluster ") ? message : "cluster " + path + ": " + message);
  }
}

Model load_model(const std::string& path) {
  try {
    return parse_model(read_json_file(path, "model"));
  } catch (const DescriptionError& e) {
    const std::string message = e.what();
    throw DescriptionError(message.starts_with("model ") ? message : "model " + path + ": " + message);
  }
}

const DeviceType& Cluster::device_type(const std::string& type) const {
  for (const auto& d : device_types)
    if (d.name == type) return d;
  throw DescriptionError("no device type '" + type + "'");
}

const NicType& Cluster::nic(const std::string& nic_name) const {
  for (const auto& n : nics)
    if (n.name == nic_name) return n;
  throw DescriptionError("no NIC type '" + nic_name + "'");
}

int Cluster::device_count() const {
  int n = 0;
  for (const auto& g : nodes) n += g.devices();
  return n;
}

int Cluster::device_count(const std::string& type) const {
  int n = 0;
  for (const auto& g : nodes)
    if (g.device_type == type) n += g.devices();
  return n;
}

bool Cluster::device_direct(const std::string& a, const std::string& b) const {
  return std::any_of(device_direct_rdma.begin(), device_direct_rdma.end(), [&](const auto& pair) {
    return (pair.first == a && pair.second == b) || (pair.first == b && pair.second == a);
  });
}

bool Cluster::collectives_direct(const std::string& a, const std::string& b) const {
  if (a != b || !device_direct_collectives) return device_direct(a, b);
  return std::find(device_direct_collectives->begin(), device_direct_collectives->end(), a) !=
         device_direct_collectives->end();
}

const InterClusterLink* Cluster::inter_cluster_link(const std::string& a, const std::string& b) const {
  for (const auto& l : inter_cluster_links)
    if ((l.a == a && l.b == b) || (l.a == b && l.b == a)) return &l;
  return nullptr;
}

int Model::dtype_bytes() const {
  return dtype == "f32" ? 4 : 2;
}

double Model::layer_parameters() const {
  const double h = static_cast<double>(hidden);
  const double kv = static_cast<double>(kv_heads) * h / static_cast<double>(heads);
  const double attention = 2 * h * h + 2 * h * kv;
  const double mlp_weights = (mlp == Mlp::swiglu ? 3.0 : 2.0) * h * static_cast<double>(ffn);
  return attention + mlp_weights + 2 * h;
}

double Model::embedding_parameters() const {
  return static_cast<double>(vocab) * static_cast<double>(hidden);
}

nlohmann::json to_json(const Model& m) {
  nlohmann::json recompute = nlohmann::json::array();
  for (Recompute r : m.recompute) recompute.push_back(to_string(r));
  return {{"name", m.name},
          {"layers", m.layers},
          {"hidden", m.hidden},
          {"ffn", m.ffn},
          {"heads", m.heads},
          {"kv_heads", m.kv_heads},
          {"seq_len", m.seq_len},
          {"vocab", m.vocab},
          {"global_batch", m.global_batch},
          {"micro_batch_sizes", m.micro_batch_sizes},
          {"dtype", m.dtype},
          {"optimizer", m.optimizer},
          {"mlp", m.mlp == Mlp::swiglu ? "swiglu" : "gelu"},
          {"norm", m.norm == Norm::layer_norm ? "layer_norm" : "rms_norm"},
          {"recompute", recompute}};
}

}  // namespace h2::heteroauto
