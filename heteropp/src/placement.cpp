#include "h2/heteropp/placement.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "h2/error.hpp"

namespace h2::heteropp {

namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw Error(H2_STATUS_INVALID_ARGUMENT, message);
}

std::string block_range(int first, int end) {
  if (end <= first) return "no blocks";
  if (end - first == 1) return "block " + std::to_string(first);
  return "blocks " + std::to_string(first) + "-" + std::to_string(end - 1);
}

}  // namespace

std::vector<int> StageRole::layers(int model_layers) const {
  std::vector<int> layers;
  if (first()) layers.push_back(-1);
  for (int b = first_block; b < end_block; ++b) layers.push_back(b);
  if (last()) layers.push_back(model_layers);
  return layers;
}

std::string StageRole::describe() const {
  return "pipeline " + std::to_string(pipeline) + " replica " + std::to_string(replica) + " stage " +
         std::to_string(stage) + (tp > 1 ? " tp " + std::to_string(tp_rank) + "/" + std::to_string(tp) : "") + " (" +
         block_range(first_block, end_block) + (first() ? ", embedding" : "") + (last() ? ", head" : "") + ")";
}

bool Placement::uniform_degree(int layer) const {
  const std::vector<int>& ranks = holders.at(layer);
  return std::all_of(ranks.begin(), ranks.end(), [&](int rank) {
    return roles[static_cast<size_t>(rank)].tp == roles[static_cast<size_t>(ranks.front())].tp;
  });
}

Placement place(const heteroauto::Plan& plan) {
  Placement placement;
  placement.model_layers = plan.model.layers;
  placement.micro_batch_size = plan.micro_batch_size;
  std::map<int, StageRole> by_rank;
  int64_t next_micro_batch = 0;
  for (size_t p = 0; p < plan.pipelines.size(); ++p) {
    const heteroauto::PlanPipeline& pipeline = plan.pipelines[p];
    const int stages = static_cast<int>(pipeline.stages.size());
    for (size_t r = 0; r < pipeline.replicas.size(); ++r) {
      const heteroauto::PlanReplica& replica = pipeline.replicas[r];
      if (replica.devices.size() != pipeline.stages.size())
        refuse("pipelines[" + std::to_string(p) + "].replicas[" + std::to_string(r) + "] lists devices for " +
               std::to_string(replica.devices.size()) + " stages, not " + std::to_string(stages));
      // ranks[k][i]: the world rank of stage k's tensor-parallel index i.
      std::vector<std::vector<int>> ranks;
      for (size_t k = 0; k < pipeline.stages.size(); ++k) {
        const int tp = pipeline.stages[k].tp;
        if (tp < 1 || replica.devices[k].size() != static_cast<size_t>(tp))
          refuse("pipelines[" + std::to_string(p) + "].replicas[" + std::to_string(r) + "] gives stage " +
                 std::to_string(k) + " " + std::to_string(replica.devices[k].size()) +
                 " devices but the stage's tensor-parallel degree is " + std::to_string(tp));
        ranks.emplace_back();
        for (const heteroauto::DeviceRef& device : replica.devices[k]) ranks.back().push_back(device.rank);
      }
      // Stage k's ranks j that rank i of stage `from` (degree t) sends to: j mod t == i.
      auto sent_to = [&](size_t k, int i, int t) {
        std::vector<int> to;
        for (size_t j = 0; j < ranks[k].size(); ++j)
          if (static_cast<int>(j) % t == i) to.push_back(ranks[k][j]);
        return to;
      };
      for (int k = 0; k < stages; ++k) {
        const size_t ks = static_cast<size_t>(k);
        const heteroauto::PlanStage& stage = pipeline.stages[ks];
        for (int i = 0; i < stage.tp; ++i) {
          StageRole role;
          role.device = replica.devices[ks][static_cast<size_t>(i)];
          role.rank = role.device.rank;
          role.pipeline = static_cast<int>(p);
          role.replica = static_cast<int>(r);
          role.stage = k;
          role.stages = stages;
          role.tp = stage.tp;
          role.tp_rank = i;
          role.tp_ranks = ranks[ks];
          role.first_block = stage.first_layer;
          role.end_block = stage.first_layer + stage.layers;
          role.micro_batches = replica.micro_batches;
          role.first_micro_batch = next_micro_batch;
          if (k > 0) {
            role.prev_rank = ranks[ks - 1][static_cast<size_t>(i) % ranks[ks - 1].size()];
            role.send_prev = sent_to(ks - 1, i, stage.tp);
          }
          if (k + 1 < stages) {
            role.next_rank = ranks[ks + 1][static_cast<size_t>(i) % ranks[ks + 1].size()];
            role.send_next = sent_to(ks + 1, i, stage.tp);
          }
          role.device_type = stage.device_type;
          if (!by_rank.emplace(role.rank, role).second)
            refuse("the plan gives rank " + std::to_string(role.rank) + " two stages");
        }
      }
      next_micro_batch += replica.micro_batches;
    }
  }
  placement.global_micro_batches = static_cast<int>(next_micro_batch);
  int expected = 0;
  for (auto& [rank, role] : by_rank) {
    if (rank != expected)
      refuse("the plan's ranks are not 0.." + std::to_string(by_rank.size() - 1) + ": rank " +
             std::to_string(expected) + " is missing");
    ++expected;
    for (int layer : role.layers(placement.model_layers)) placement.holders[layer].push_back(rank);
    placement.roles.push_back(role);
  }
  // Each layer's pieces for the gradient sums: the least common multiple of its holders' degrees; a
  // rank of degree t and index r holds pieces [r F/t, (r+1) F/t).
  for (const auto& [layer, holders] : placement.holders) {
    int pieces = 1;
    for (int rank : holders) pieces = std::lcm(pieces, placement.roles[static_cast<size_t>(rank)].tp);
    placement.pieces[layer] = pieces;
    for (int rank : holders) {
      const StageRole& role = placement.roles[static_cast<size_t>(rank)];
      const int per_rank = pieces / role.tp;
      for (int piece = role.tp_rank * per_rank; piece < (role.tp_rank + 1) * per_rank; ++piece)
        placement.piece_holders[{layer, piece}].push_back(rank);
    }
  }
  if (placement.roles.empty()) refuse("the plan has no stages");
  return placement;
}

LocalDevices local_devices(const heteroauto::Cluster& cluster) {
  LocalDevices local;
  for (const heteroauto::NodeGroup& group : cluster.nodes) {
    const heteroauto::DeviceType& type = cluster.device_type(group.device_type);
    if (type.plugin.empty()) continue;
    for (int node = 0; node < group.count; ++node) {
      for (int device = 0; device < group.devices_per_node; ++device) {
        std::vector<double>& memory = local.memory_gib[type.plugin];
        local.devices.push_back(
            {{group.name, node, device, 0}, type.name, type.plugin + ":" + std::to_string(memory.size())});
        memory.push_back(type.memory_gib);
      }
    }
  }
  return local;
}

LocalDevices local_devices(const heteroauto::Plan& plan, const heteroauto::Cluster& cluster) {
  LocalDevices local = local_devices(cluster);
  for (const StageRole& role : place(plan).roles) {
    const auto found = std::find_if(local.devices.begin(), local.devices.end(), [&](const LocalDevice& d) {
      return d.ref.node_group == role.device.node_group && d.ref.node == role.device.node &&
             d.ref.device == role.device.device;
    });
    if (found == local.devices.end())
      refuse("device type '" + role.device_type + "' (node group '" + role.device.node_group +
             "') has no \"plugin\" in the cluster description: name the H2 plugin that runs it, e.g. "
             "\"plugin\": \"cpu-reference\"");
    local.per_rank.push_back(found->label);
  }
  return local;
}

}  // namespace h2::heteropp
