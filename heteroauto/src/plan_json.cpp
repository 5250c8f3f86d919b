// The plan file: written by `h2 plan`, read by `h2 train` (HeteroPP).
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "h2/heteroauto/cost_model.hpp"
#include "h2/heteroauto/plan.hpp"
#include "json_reader.hpp"

namespace h2::heteroauto {

namespace {

// Indices and counts in a plan: the most devices or layers a description may have.
constexpr int64_t kMaxIndex = 1 << 24;
constexpr int kPlanVersion = 1;

nlohmann::json device_json(const DeviceRef& d) {
  return {{"node_group", d.node_group}, {"node", d.node}, {"device", d.device}, {"rank", d.rank}};
}

DeviceRef parse_device(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  DeviceRef d;
  d.node_group = r.string("node_group");
  d.node = static_cast<int>(r.optional_integer("node", 0, 0, kMaxIndex));
  d.device = static_cast<int>(r.optional_integer("device", 0, 0, kMaxIndex));
  d.rank = static_cast<int>(r.optional_integer("rank", 0, 0, kMaxIndex));
  r.reject_unknown();
  return d;
}

PlanStage parse_stage(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  PlanStage s;
  s.node_group = r.string("node_group");
  s.device_type = r.string("device_type");
  s.tp = static_cast<int>(r.required_integer("tp", 1, 1024));
  s.first_layer = static_cast<int>(r.optional_integer("first_layer", 0, 0, kMaxIndex));
  s.layers = static_cast<int>(r.required_integer("layers", 1, kMaxIndex));
  const std::string recompute = r.string("recompute", "none");
  if (recompute != "none" && recompute != "full") r.fail("recompute", "must be none or full");
  s.recompute = recompute == "full" ? Recompute::full : Recompute::none;
  s.forward_s = r.number("forward_ms", 0, 0, 1e12) * 1e-3;
  s.backward_s = r.number("backward_ms", 0, 0, 1e12) * 1e-3;
  s.memory_bytes = r.number("memory_gib", 0, 0, 1e12) * kGiB;
  s.capacity_bytes = r.number("capacity_gib", 0, 0, 1e12) * kGiB;
  r.reject_unknown();
  return s;
}

PlanReplica parse_replica(const nlohmann::json& j, const std::string& path, size_t stages) {
  JsonReader r(j, path);
  PlanReplica replica;
  replica.micro_batches = static_cast<int>(r.required_integer("micro_batches", 1, INT32_MAX));
  replica.pipeline_time_s = r.number("pipeline_time_s", 0, 0, 1e12);
  r.array("devices", true, false, [&](const nlohmann::json& stage, const std::string& stage_path) {
    if (!stage.is_array() || stage.empty())
      throw DescriptionError(stage_path + ": must be a non-empty array of devices");
    std::vector<DeviceRef> devices;
    for (size_t i = 0; i < stage.size(); ++i)
      devices.push_back(parse_device(stage[i], stage_path + "[" + std::to_string(i) + "]"));
    replica.devices.push_back(std::move(devices));
  });
  if (replica.devices.size() != stages)
    r.fail("devices",
           "has " + std::to_string(replica.devices.size()) + " stages; the pipeline has " + std::to_string(stages));
  r.reject_unknown();
  return replica;
}

PlanPipeline parse_pipeline(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  PlanPipeline p;
  r.array("stages", true, false,
          [&](const nlohmann::json& s, const std::string& sp) { p.stages.push_back(parse_stage(s, sp)); });
  if (const nlohmann::json* t = r.optional("transfer_ms")) {
    if (!t->is_array()) r.fail("transfer_ms", "must be an array of numbers");
    for (const auto& v : *t) {
      if (!v.is_number()) r.fail("transfer_ms", "must be an array of numbers");
      p.transfer_s.push_back(v.get<double>() * 1e-3);
    }
  }
  p.bubble_fraction = r.number("bubble_fraction", 0, 0, 1);
  r.array("replicas", true, false, [&](const nlohmann::json& rj, const std::string& rp) {
    p.replicas.push_back(parse_replica(rj, rp, p.stages.size()));
  });
  r.reject_unknown();
  return p;
}

}  // namespace

int Plan::replica_count() const {
  int n = 0;
  for (const PlanPipeline& p : pipelines) n += static_cast<int>(p.replicas.size());
  return n;
}

int Plan::micro_batch_count() const {
  int n = 0;
  for (const PlanPipeline& p : pipelines)
    for (const PlanReplica& r : p.replicas) n += r.micro_batches;
  return n;
}

nlohmann::json to_json(const Plan& plan) {
  nlohmann::json pipelines = nlohmann::json::array();
  for (const PlanPipeline& p : plan.pipelines) {
    nlohmann::json stages = nlohmann::json::array(), replicas = nlohmann::json::array(),
                   transfers = nlohmann::json::array();
    for (const PlanStage& s : p.stages)
      stages.push_back({{"node_group", s.node_group},
                        {"device_type", s.device_type},
                        {"tp", s.tp},
                        {"first_layer", s.first_layer},
                        {"layers", s.layers},
                        {"recompute", to_string(s.recompute)},
                        {"forward_ms", s.forward_s * 1e3},
                        {"backward_ms", s.backward_s * 1e3},
                        {"memory_gib", s.memory_bytes / kGiB},
                        {"capacity_gib", s.capacity_bytes / kGiB}});
    for (double t : p.transfer_s) transfers.push_back(t * 1e3);
    for (const PlanReplica& r : p.replicas) {
      nlohmann::json devices = nlohmann::json::array();
      for (const auto& stage : r.devices) {
        nlohmann::json d = nlohmann::json::array();
        for (const DeviceRef& ref : stage) d.push_back(device_json(ref));
        devices.push_back(d);
      }
      replicas.push_back(
          {{"micro_batches", r.micro_batches}, {"pipeline_time_s", r.pipeline_time_s}, {"devices", devices}});
    }
    pipelines.push_back({{"stages", stages},
                         {"transfer_ms", transfers},
                         {"bubble_fraction", p.bubble_fraction},
                         {"replicas", replicas}});
  }
  const PlanPrediction& e = plan.prediction;
  return {{"format", "h2-plan"},
          {"version", kPlanVersion},
          {"cluster", plan.cluster},
          {"model", to_json(plan.model)},
          {"micro_batch_size", plan.micro_batch_size},
          {"distributed_optimizer", plan.distributed_optimizer},
          {"pipelines", pipelines},
          {"prediction",
           {{"step_time_s", e.step_time_s},
            {"pipeline_time_s", e.pipeline_time_s},
            {"dp_allreduce_s", e.dp_allreduce_s},
            {"exposed_allreduce_s", e.exposed_allreduce_s},
            {"optimizer_s", e.optimizer_s},
            {"weight_gather_s", e.weight_gather_s},
            {"tokens_per_s", e.tokens_per_s},
            {"mfu", e.mfu},
            {"bubble_fraction", e.bubble_fraction},
            {"bottleneck", e.bottleneck},
            {"cost_basis", e.cost_basis},
            {"devices_used", e.devices_used},
            {"devices_total", e.devices_total}}}};
}

Plan plan_from_json(const nlohmann::json& json) {
  JsonReader r(json, "");
  if (r.string("format") != "h2-plan") r.fail("format", "must be \"h2-plan\"");
  if (r.required_integer("version", 1, 1 << 20) != kPlanVersion)
    r.fail("version", "this h2 reads plan version " + std::to_string(kPlanVersion));
  Plan plan;
  plan.cluster = r.string("cluster", "");
  plan.model = parse_model(r.required("model"));
  plan.micro_batch_size = static_cast<int>(r.required_integer("micro_batch_size", 1, INT32_MAX));
  if (const nlohmann::json* d = r.optional("distributed_optimizer")) {
    if (!d->is_boolean()) r.fail("distributed_optimizer", "must be true or false");
    plan.distributed_optimizer = d->get<bool>();
  }
  r.array("pipelines", true, false,
          [&](const nlohmann::json& p, const std::string& path) { plan.pipelines.push_back(parse_pipeline(p, path)); });
  if (const nlohmann::json* p = r.optional("prediction")) {
    JsonReader pr(*p, r.path_of("prediction"));
    PlanPrediction& e = plan.prediction;
    e.step_time_s = pr.number("step_time_s", 0, 0, 1e12);
    e.pipeline_time_s = pr.number("pipeline_time_s", 0, 0, 1e12);
    e.dp_allreduce_s = pr.number("dp_allreduce_s", 0, 0, 1e12);
    e.exposed_allreduce_s = pr.number("exposed_allreduce_s", e.dp_allreduce_s, 0, 1e12);
    e.optimizer_s = pr.number("optimizer_s", 0, 0, 1e12);
    e.weight_gather_s = pr.number("weight_gather_s", 0, 0, 1e12);
    e.tokens_per_s = pr.number("tokens_per_s", 0, 0, 1e18);
    e.mfu = pr.number("mfu", 0, 0, 1);
    e.bubble_fraction = pr.number("bubble_fraction", 0, 0, 1);
    e.bottleneck = pr.string("bottleneck", "");
    if (const nlohmann::json* basis = pr.optional("cost_basis")) {
      if (!basis->is_object()) pr.fail("cost_basis", "must be an object of device type -> basis");
      for (const auto& [type, how] : basis->items()) {
        if (!how.is_string()) pr.fail("cost_basis", "'" + type + "' must name a basis as a string");
        e.cost_basis[type] = how.get<std::string>();
      }
    }
    e.devices_used = static_cast<int>(pr.optional_integer("devices_used", 0, 0, kMaxIndex));
    e.devices_total = static_cast<int>(pr.optional_integer("devices_total", 0, 0, kMaxIndex));
    pr.reject_unknown();
  }
  r.reject_unknown();
  return plan;
}

void check_plan_invariants(const Plan& plan, const Cluster& cluster) {
  const int layers = plan.model.layers;
  std::set<std::tuple<std::string, int, int>> used;
  std::set<int> ranks;
  for (size_t pi = 0; pi < plan.pipelines.size(); ++pi) {
    const PlanPipeline& p = plan.pipelines[pi];
    const std::string where = "pipelines[" + std::to_string(pi) + "]";
    int next = 0;
    for (size_t k = 0; k < p.stages.size(); ++k) {
      const PlanStage& s = p.stages[k];
      if (s.first_layer != next || s.layers < 1)
        throw DescriptionError(where + ".stages[" + std::to_string(k) + "]: layers start at " +
                               std::to_string(s.first_layer) + " (count " + std::to_string(s.layers) +
                               "); the previous stage ends at " + std::to_string(next));
      next += s.layers;
    }
    if (next != layers)
      throw DescriptionError(where + ": its stages hold " + std::to_string(next) + " layers; the model has " +
                             std::to_string(layers));
    for (size_t ri = 0; ri < p.replicas.size(); ++ri) {
      const PlanReplica& r = p.replicas[ri];
      if (r.micro_batches < 1)
        throw DescriptionError(where + ".replicas[" + std::to_string(ri) + "]: has no micro-batches");
      for (size_t k = 0; k < r.devices.size(); ++k) {
        if (static_cast<int>(r.devices[k].size()) != p.stages[k].tp)
          throw DescriptionError(where + ".replicas[" + std::to_string(ri) + "].devices[" + std::to_string(k) +
                                 "]: " + std::to_string(r.devices[k].size()) + " devices for tp " +
                                 std::to_string(p.stages[k].tp));
        for (const DeviceRef& d : r.devices[k]) {
          const std::string name =
              d.node_group + " node " + std::to_string(d.node) + " device " + std::to_string(d.device);
          const NodeGroup* group = nullptr;
          for (const NodeGroup& g : cluster.nodes)
            if (g.name == d.node_group) group = &g;
          if (!group) throw DescriptionError(where + ": " + name + ": no such node group in the cluster");
          if (d.node >= group->count || d.device >= group->devices_per_node)
            throw DescriptionError(where + ": " + name + ": the group has " + std::to_string(group->count) +
                                   " nodes of " + std::to_string(group->devices_per_node) + " devices");
          if (group->device_type != p.stages[k].device_type)
            throw DescriptionError(where + ": " + name + " is a " + group->device_type + ", the stage wants " +
                                   p.stages[k].device_type);
          if (!used.insert({d.node_group, d.node, d.device}).second)
            throw DescriptionError(where + ": " + name + " is used twice");
          if (!ranks.insert(d.rank).second)
            throw DescriptionError(where + ": rank " + std::to_string(d.rank) + " is used twice");
        }
      }
    }
  }
  const int64_t samples = static_cast<int64_t>(plan.micro_batch_count()) * plan.micro_batch_size;
  if (samples != plan.model.global_batch)
    throw DescriptionError("the replicas' micro-batches x micro-batch size cover " + std::to_string(samples) +
                           " samples; the global batch is " + std::to_string(plan.model.global_batch));
}

Plan load_plan(const std::string& path) {
  const nlohmann::json json = read_json_file(path, "plan");
  try {
    return plan_from_json(json);
  } catch (const DescriptionError& e) {
    throw DescriptionError("plan " + path + ": " + e.what());
  }
}

}  // namespace h2::heteroauto
