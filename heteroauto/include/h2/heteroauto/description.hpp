// The planner's inputs: a cluster description (device types, nodes, NICs, links between clusters)
// and a model description, both read from JSON and validated field by field. Every error names the
// JSON path of the offending field ("device_types[1].memory_gib: must be > 0"). Bandwidths are in
// gigabits per second everywhere, latencies in microseconds, memory in GiB.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace h2::heteroauto {

class DescriptionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class NicKind { infiniband, roce, ethernet };

enum class Recompute { none, full };
enum class Mlp { gelu, swiglu };
enum class Norm { rms_norm, layer_norm };  // for training; the cost model treats both alike

struct Model {
  std::string name;
  int layers = 0;
  int64_t hidden = 0, ffn = 0, heads = 0, kv_heads = 0, seq_len = 0, vocab = 0;
  int64_t global_batch = 0;
  std::vector<int> micro_batch_sizes;
  std::string dtype = "bf16";
  std::string optimizer = "adamw";
  Mlp mlp = Mlp::gelu;
  Norm norm = Norm::rms_norm;
  std::vector<Recompute> recompute{Recompute::none, Recompute::full};

  int dtype_bytes() const;
  double layer_parameters() const;      // one transformer block
  double embedding_parameters() const;  // the token embedding; the LM head is as large
};

// One measured point: a part of the model's forward and backward time on one device, for one
// micro-batch size, at tensor-parallel degree 1.
struct MeasuredTime {
  int micro_batch = 1;
  double forward_ms = 0;
  double backward_ms = 0;
  // The tensor-parallel degree it was measured at: one rank's time, the degree's communication
  // included. A stage of degree d uses the points of degree d where there are any, else those of
  // degree 1 divided by d plus the allreduces the cost model charges (small layers rarely get 1/d).
  int tp = 1;
};

// What `h2 profile` (or a person) measured for one model on a device type. The cost model
// interpolates linearly between the measured micro-batch sizes and scales linearly beyond them
// (all but the fixed share below).
struct MeasuredProfile {
  std::vector<MeasuredTime> layer;      // one transformer block; ascending (tp, micro-batch size)
  std::vector<MeasuredTime> embedding;  // the token embedding (first stage); empty: not measured
  std::vector<MeasuredTime> head;       // final norm, LM head and loss (last stage); empty: not measured
  // The share of a pass at the smallest measured micro-batch size (of the degree used) that neither a larger
  // micro-batch nor tensor parallelism shrinks: kernel launches, synchronisation, matrices too small
  // to fill the device. Beyond the measured sizes a pass takes that fixed part plus the rest scaled
  // with the micro-batch, and a layer cut over d ranks takes the fixed part plus 1/d of the rest.
  // 0 (the default): everything scales. A profile measured at one size cannot show it; it can be
  // fitted to homogeneous runs of the type (DeviceType::calibrated_from, calibration.hpp).
  double fixed_share = 0;
  // Once per step, per parameter: zeroing the gradients, their norm and the AdamW update.
  double optimizer_ns_per_parameter = 0;
  // Of it, the norm and the update: what the distributed optimizer does for 1/n of the parameters
  // only (the zeroing stays whole). 0: not measured apart, and then charged whole.
  double update_ns_per_parameter = 0;
  // How far the measurement's repeats lay apart (h2 profile: the layer's interquartile range over its
  // median, or between the type's devices): a prediction from it means no more than that. 0: not said.
  double spread = 0;
  int repeats = 0;         // timed repeats per point (0: not said)
  double uncertainty = 0;  // of its medians, relative: from the spread and the repeats, or between devices
};

// `count` identical nodes, each with `devices_per_node` devices of one type.
struct NodeGroup {
  std::string name;
  std::string device_type;
  int count = 0;
  int devices_per_node = 0;
  double intra_node_bandwidth_gbps = 0;
  double intra_node_latency_us = 0;
  std::string nic;  // a NicType name
  int nics_per_node = 1;
  std::string cluster;          // sub-cluster (datacenter) the nodes belong to
  bool on_shared_host = false;  // its devices compute on the cluster's shared_host (below)

  int devices() const { return count * devices_per_node; }
};

// Devices simulated on one machine's cores (cpu-reference devices, as `h2 train` and `h2 profile` run
// them): each busy device computes on `threads_per_device` of the host's `cores`, and when more are
// busy than the cores hold, they share them evenly (processor sharing), so a device computes slower
// while others do. `h2 profile` measures such devices a coreful at a time (each at full speed) and
// writes this section; the evaluator then simulates the plan's passes with the sharing (simulator.hpp).
struct SharedHost {
  double cores = 1;
  double threads_per_device = 1;
  std::vector<std::string> node_groups;  // every device of these groups computes on the host
};

// A homogeneous run of a device type that the type is fitted to (calibration.hpp): the model, the
// nodes and the layout it ran, and the step time measured (or published) for it. What is fitted
// (the efficiency, or the fixed share of the model's measured profile) is then used unchanged
// wherever the type appears, in mixed clusters too.
struct Calibration {
  std::string path;    // where it is in the description, for messages ("device_types[0].calibrated_from[1]")
  std::string source;  // where the measurement comes from, in words
  Model model;
  NodeGroup nodes;  // name "calibration", device_type the type's own; nic one of the cluster's nic_types
  int tp = 1, pp = 1, micro_batch = 1;  // data parallelism: the rest of the devices
  Recompute recompute = Recompute::none;
  int grad_comm_bytes = 4;             // what its gradients travelled in (4: f32)
  bool overlap_grad_reduce = false;    // whether its gradient sums overlapped the backward pass
  bool distributed_optimizer = false;  // whether it ran with the distributed optimizer
  double step_time_s = 0;
};

struct DeviceType {
  std::string name;
  std::string vendor;
  std::string plugin;  // the H2 plugin that drives it ("cpu-reference", "cuda"); "" for planning only
  std::map<std::string, double> peak_tflops;  // per dtype name ("bf16", "f16", "f32")
  double memory_gib = 0;
  double efficiency = 0.5;          // achieved fraction of peak on transformer layers
  double runtime_overhead_gib = 1;  // framework, allocator and communication buffers
  double host_link_gbps = 200;      // device <-> host (PCIe), for host staging
  // By model name: measured times replace peak x efficiency for that model.
  std::map<std::string, MeasuredProfile> measured;
  // Homogeneous runs to fit the type to (calibrate_cluster; "calibrated_from": one run or a list).
  // Runs of a model with a measured profile fit that profile's fixed_share; the others fit
  // `efficiency`, which the description then does not give.
  std::vector<Calibration> calibrated_from;

  // Whether `run` fits the efficiency (the type has no measured profile of its model) rather than a
  // profile's fixed share; and whether any of the type's runs does.
  bool fits_efficiency(const Calibration& run) const { return !measured.count(run.model.name); }
  bool efficiency_calibrated() const {
    for (const Calibration& run : calibrated_from)
      if (fits_efficiency(run)) return true;
    return false;
  }
};

struct NicType {
  std::string name;
  NicKind kind = NicKind::ethernet;
  double bandwidth_gbps = 0;  // nominal (line rate)
  double latency_us = 0;
  // Achieved fraction of the line rate for training's large transfers; by default the kind's
  // (default_nic_efficiency), since equal line rates do not train equally fast.
  double efficiency = 1;
};

// What a NIC kind achieves of its line rate when the description does not say (docs/heteroauto-cost-model.md
// gives the measurements behind each).
double default_nic_efficiency(NicKind kind);

struct InterClusterLink {
  std::string a, b;
  double bandwidth_gbps = 0;
  double latency_us = 0;
};

struct Cluster {
  std::string name;
  std::vector<DeviceType> device_types;
  std::vector<NicType> nics;
  std::vector<NodeGroup> nodes;
  std::vector<InterClusterLink> inter_cluster_links;
  // Which transfers the NICs make from device memory where it lies; the others are staged through
  // host memory, a copy each way over the host link. Two facts, because a runtime may move the two
  // kinds of traffic differently (H2's DiComm stages every point-to-point transfer of accelerator
  // memory, while a vendor's collective library may move its gradients device-direct):
  // - device_direct_rdma: vendor pairs (either order) whose point-to-point transfers (pipeline sends)
  //   go device-direct, and so do the collective steps between different vendors' devices;
  // - device_direct_collectives: vendors whose collectives among their own devices (gradient sums)
  //   go device-direct; when the description leaves it out, those with [v, v] in device_direct_rdma
  //   (one library for both, as NCCL for Megatron).
  std::vector<std::pair<std::string, std::string>> device_direct_rdma;
  std::optional<std::vector<std::string>> device_direct_collectives;
  std::optional<SharedHost> shared_host;

  const DeviceType& device_type(const std::string& name) const;
  const NicType& nic(const std::string& name) const;
  int device_count() const;
  int device_count(const std::string& type) const;
  // Whether point-to-point transfers between the two vendors' devices go device-direct.
  bool device_direct(const std::string& vendor_a, const std::string& vendor_b) const;
  // Whether a collective's transfers between the two vendors' devices do.
  bool collectives_direct(const std::string& vendor_a, const std::string& vendor_b) const;
  // The link between two sub-clusters; nullptr when none is described.
  const InterClusterLink* inter_cluster_link(const std::string& a, const std::string& b) const;
};

Cluster parse_cluster(const nlohmann::json& json);
Model parse_model(const nlohmann::json& json);
// The same for a model inside another description: errors name its fields under `path`.
Model parse_model_at(const nlohmann::json& json, const std::string& path);
// The deepest nesting a description, plan or checkpoint manifest may have: far beyond any real one
// (they nest 4 levels), and near enough that recursive walks over a value (nlohmann's dump, for an
// error message) stay far from the stack's end. 100,000 levels crashed `h2 plan` in dump().
constexpr int kMaxJsonDepth = 64;
// Parses JSON, refusing nesting deeper than kMaxJsonDepth. Throws nlohmann::json::exception for
// invalid JSON (parse_error) and for numbers beyond a double (out_of_range: "2E516", which fuzzing
// found escaping as an unnamed error), std::length_error ("nested deeper than 64 levels").
nlohmann::json parse_json_bounded(std::istream& in);
// At most `max_chars` of `value`'s JSON text, for error messages ("..." where cut).
std::string brief_json(const nlohmann::json& value, size_t max_chars = 60);
// Reads a JSON file; throws DescriptionError "WHAT PATH: cannot be read" or "...: not valid JSON".
nlohmann::json read_json_file(const std::string& path, const char* what);
// Reads and parses a file; errors name the file.
Cluster load_cluster(const std::string& path);
Model load_model(const std::string& path);

nlohmann::json to_json(const Model& model);

std::string to_string(NicKind kind);
std::string to_string(Recompute recompute);

}  // namespace h2::heteroauto
