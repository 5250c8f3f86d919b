#include "rank_checkpoints.hpp"

#include <algorithm>
#include <filesystem>

#include "h2/heteropp/sharding.hpp"

namespace h2::heteropp {

namespace {

namespace fs = std::filesystem;

// The architecture fields of a model description; a checkpoint of another architecture is refused.
constexpr const char* kArchitecture[] = {"layers",  "hidden", "ffn", "heads", "kv_heads",
                                         "seq_len", "vocab",  "mlp", "norm"};

}  // namespace

void check_same_architecture(const nlohmann::json& saved, const heteroauto::Model& model,
                             const std::string& checkpoint) {
  const nlohmann::json mine = heteroauto::to_json(model);
  for (const char* field : kArchitecture) {
    if (saved.value(field, nlohmann::json()) != mine.value(field, nlohmann::json()))
      throw Error(H2_STATUS_INVALID_ARGUMENT, "checkpoint " + checkpoint + " is of another model: its " + field +
                                                  " is " + saved.value(field, nlohmann::json()).dump() +
                                                  ", this model's is " + mine.value(field, nlohmann::json()).dump());
  }
}

RankCheckpoints::RankCheckpoints(const Placement& placement, const dicomm::Communicator& world,
                                 const dicomm::Communicator& tp_comm, GptStage& model, AdamW& optimizer,
                                 ShardedAdamW* sharded, Stream& stream, Timeline& timeline)
    : placement_(placement),
      world_(world),
      tp_comm_(tp_comm),
      role_(placement.roles.at(static_cast<size_t>(world.rank()))),
      model_(model),
      optimizer_(optimizer),
      sharded_(sharded),
      stream_(stream),
      timeline_(timeline) {}

std::vector<RankCheckpoints::LayerTensor> RankCheckpoints::layer_state(int layer, const ShardedAdamW::State& sharded) {
  std::vector<LayerTensor> tensors;
  for (size_t i = 0; i < model_.parameters().size(); ++i) {
    const Parameter& p = model_.parameters()[i];
    if (p.layer != layer) continue;
    const auto found = sharded.find(i);
    const bool in_slices = found != sharded.end();
    const Tensor& master = in_slices ? found->second.master : p.master;
    const Tensor& m = in_slices ? found->second.exp_avg : optimizer_.exp_avg(i);
    const Tensor& v = in_slices ? found->second.exp_avg_sq : optimizer_.exp_avg_sq(i);
    tensors.push_back({{p.name, master}, p.sharding, p.full_shape});
    tensors.push_back({{p.name + ".exp_avg", m}, p.sharding, p.full_shape});
    tensors.push_back({{p.name + ".exp_avg_sq", v}, p.sharding, p.full_shape});
  }
  return tensors;
}

void RankCheckpoints::load(const std::string& step_dir, const CheckpointState& manifest) {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  const ShardedAdamW::State sharded = sharded_ ? sharded_->empty_state() : ShardedAdamW::State{};
  for (int layer : role_.layers(placement_.model_layers)) {
    const std::vector<LayerTensor> state = layer_state(layer, sharded);
    std::vector<NamedTensor> whole;
    for (const LayerTensor& t : state)
      whole.push_back({t.local.name, t.cut() ? Tensor::empty(stream_, t.whole_shape, DType::f32) : t.local.tensor});
    read_layer(stream_, step_dir, manifest, layer, placement_.model_layers, whole);
    for (size_t i = 0; i < state.size(); ++i)
      if (state[i].cut())
        copy_shard(stream_, whole[i].tensor, state[i].local.tensor, state[i].sharding, role_.tp, role_.tp_rank, true);
  }
  if (sharded_) sharded_->scatter_state(sharded);
  model_.copy_masters_to_values();
  timeline_.add("load checkpoint", "checkpoint", start, Timeline::Clock::now(), {{"from", step_dir}});
}

Tensor RankCheckpoints::gather_whole(const LayerTensor& t) {
  const Tensor& local = t.local.tensor;
  const int64_t n = local.numel();
  const Tensor gathered = Tensor::empty(stream_, {n * role_.tp}, DType::f32);
  tp_comm_.allgather(stream_, local.view({n}), gathered);
  const Tensor whole = Tensor::empty(stream_, t.whole_shape, DType::f32);
  for (int r = 0; r < role_.tp; ++r)
    copy_shard(stream_, whole, gathered.slice(0, r * n, (r + 1) * n).view(local.shape()), t.sharding, role_.tp, r,
               false);
  return whole;
}

std::string RankCheckpoints::save(const std::string& out_dir, const CheckpointState& state, int keep) {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  const std::string root = (fs::path(out_dir) / "checkpoints").string();
  // Rank 0 makes a fresh partial directory before anyone writes into it (the commit protocol in
  // checkpoint.hpp: a committed checkpoint is never written again).
  if (world_.rank() == 0) begin_checkpoint(root, state.step);
  world_.barrier();
  const std::string dir = partial_directory(root, state.step);
  try {
    const ShardedAdamW::State sharded = sharded_ ? sharded_->gather_state() : ShardedAdamW::State{};
    for (int layer : role_.layers(placement_.model_layers)) {
      // The owner's tensor-parallel group gathers the layer's shards; the owner writes it.
      const std::vector<int>& group = placement_.owner_group(layer);
      if (std::find(group.begin(), group.end(), world_.rank()) == group.end()) continue;
      std::vector<NamedTensor> whole;
      for (const LayerTensor& t : layer_state(layer, sharded))
        whole.push_back({t.local.name, t.cut() ? gather_whole(t) : t.local.tensor});
      if (placement_.owner(layer) == world_.rank()) write_layer(stream_, dir, layer, placement_.model_layers, whole);
    }
    world_.barrier();  // every layer is on disk before the manifest says so
    if (world_.rank() == 0) commit_checkpoint(root, dir, state, placement_.model_layers, keep);
  } catch (const std::exception&) {
    // This save cannot complete (a full disk, a failed peer): what it wrote goes rather than hold the
    // space (the next save would remove it too). Once committed, the partial directory is no more.
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    throw;
  }
  world_.barrier();
  timeline_.add("checkpoint", "checkpoint", start, Timeline::Clock::now(), {{"step", state.step}});
  return find_checkpoint(root);  // the committed directory, which rank 0 named
}

}  // namespace h2::heteropp
