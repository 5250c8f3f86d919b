// Who does what in a plan: every world rank's pipeline, replica and stage, its place in the stage's
// tensor-parallel group, the blocks it holds, its neighbours in the pipeline, where its micro-batches
// sit in the step's global batch, and which ranks hold each layer and each piece of it (the ranks
// whose gradients of it are summed). Replicas may cut one layer with different tensor-parallel
// degrees (HexiScale's asymmetric tensor parallelism).
//
// Neighbouring stages may have different tensor-parallel degrees. Every rank of a stage holds the
// whole activations, so rank i of a stage with degree t receives them from rank i mod t' of the
// previous stage (degree t'), and sends its own to the next stage's ranks j with j mod t = i;
// gradients flow back the same way.
//
// Layers are numbered as GptStage names its parameters: -1 is the token embedding, 0..L-1 the
// transformer blocks, L the final norm and LM head.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "h2/heteroauto/description.hpp"
#include "h2/heteroauto/plan.hpp"

namespace h2::heteropp {

struct StageRole {
  int rank = 0;
  int pipeline = 0, replica = 0, stage = 0, stages = 1;
  int first_block = 0, end_block = 0;  // transformer blocks [first_block, end_block)
  int micro_batches = 0;               // this replica's micro-batches per step
  // Index of this replica's first micro-batch among the step's micro-batches of every replica
  // (replicas in plan order), so that micro-batch j holds samples (first_micro_batch + j) * size...
  int64_t first_micro_batch = 0;
  int tp = 1, tp_rank = 0;    // the stage's tensor-parallel degree, this rank's index in it
  std::vector<int> tp_ranks;  // world ranks of the stage's tensor-parallel group, by index
  // The neighbouring stages' ranks this rank receives activations (prev) and gradients (next) from;
  // -1: none.
  int prev_rank = -1, next_rank = -1;
  std::vector<int> send_prev, send_next;  // the neighbouring stages' ranks this rank sends to
  heteroauto::DeviceRef device;
  std::string device_type;

  bool first() const { return stage == 0; }
  bool last() const { return stage == stages - 1; }
  std::vector<int> layers(int model_layers) const;  // -1 if first, its blocks, model_layers if last
  std::string describe() const;                     // "pipeline 0 replica 1 stage 2 (blocks 4-5)"
};

struct Placement {
  int model_layers = 0;
  int micro_batch_size = 0;
  int global_micro_batches = 0;  // over every replica
  std::vector<StageRole> roles;  // by world rank
  // Layer (-1..L) -> the world ranks that hold it (or a shard of it), ascending.
  std::map<int, std::vector<int>> holders;
  // Layer -> the pieces its sharded parameters are cut into for the gradient sums: the least common
  // multiple F of its holders' tensor-parallel degrees. A rank of degree t and index r holds pieces
  // [r F/t, (r+1) F/t); with one degree for all holders a piece is a rank's whole shard.
  std::map<int, int> pieces;
  // (layer, piece) -> the ranks holding that piece, one per replica: the ranks whose gradients of it
  // are summed.
  std::map<std::pair<int, int>, std::vector<int>> piece_holders;

  int world_size() const { return static_cast<int>(roles.size()); }
  // Whether every holder of `layer` has one tensor-parallel degree.
  bool uniform_degree(int layer) const;
  // The rank whose copy of `layer` is counted once for the global gradient norm and written to
  // checkpoints: the lowest holder. Its tensor-parallel group (`owner_group`) holds the layer's shards.
  int owner(int layer) const { return holders.at(layer).front(); }
  const std::vector<int>& owner_group(int layer) const { return roles.at(static_cast<size_t>(owner(layer))).tp_ranks; }
};

// Throws h2::Error (H2_STATUS_INVALID_ARGUMENT) naming the stage when the plan is malformed (a stage's
// device list not as long as its degree, ranks not 0..N-1).
Placement place(const heteroauto::Plan& plan);

// Where each device runs when the whole cluster is simulated on this machine (`h2 train` and
// `h2 profile` without Slurm): the plugin of its device type and an index that counts that plugin's
// devices in cluster order (node group, node, device), so that two groups of cpu-reference devices
// become devices 0..n-1 of one plugin. `memory_gib` lists every such device's memory per plugin, in
// index order. Devices of a type without a "plugin" are left out.
struct LocalDevice {
  heteroauto::DeviceRef ref;  // rank unused
  std::string device_type;
  std::string label;  // "cpu-reference:3", for H2_DEVICE
};
struct LocalDevices {
  std::vector<LocalDevice> devices;                       // cluster order
  std::vector<std::string> per_rank;                      // labels, by the plan's rank (plans only)
  std::map<std::string, std::vector<double>> memory_gib;  // plugin -> per device index
};
LocalDevices local_devices(const heteroauto::Cluster& cluster);
// Throws h2::Error naming the device type when a rank's device type has no "plugin".
LocalDevices local_devices(const heteroauto::Plan& plan, const heteroauto::Cluster& cluster);

}  // namespace h2::heteropp
