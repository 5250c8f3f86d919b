#include "gradient_sync.hpp"

#include <algorithm>

#include "h2/ops.hpp"

namespace h2::heteropp {

namespace {

bool contains(const std::vector<int>& ranks, int rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// Piece `piece` (of `pieces`) of this rank's shard of parameter `index`, for a rank of degree `tp` and
// index `tp_rank`: one part per group of the parameter's sharding.
std::vector<GradientSync::Part> piece_parts(size_t index, const Parameter& p, int pieces, int tp, int tp_rank,
                                            int piece) {
  std::vector<GradientSync::Part> parts;
  const int64_t local = piece - static_cast<int64_t>(tp_rank) * (pieces / tp);
  int64_t group_start = 0;
  for (int64_t width : p.sharding.groups) {
    const int64_t part = width / pieces;
    parts.push_back({.parameter = index,
                     .axis = p.sharding.axis,
                     .begin = group_start + local * part,
                     .end = group_start + (local + 1) * part});
    group_start += width / tp;
  }
  return parts;
}

// A layer's f32 gradient bytes, whole: the same number on every rank, whatever it holds of the layer.
double layer_gradient_bytes(const heteroauto::Model& model, int layer) {
  const double parameters =
      layer >= 0 && layer < model.layers ? model.layer_parameters() : model.embedding_parameters();
  return 4 * parameters;
}

double seconds_between(Timeline::Clock::time_point start, Timeline::Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

GradientSync::GradientSync(const Placement& placement, const heteroauto::Model& model_description,
                           const dicomm::Communicator& world, GptStage& model, Stream& stream, Timeline& timeline,
                           const GradientSyncOptions& options)
    : placement_(placement),
      world_(world),
      role_(placement.roles.at(static_cast<size_t>(world.rank()))),
      model_(model),
      stream_(stream),
      timeline_(timeline),
      options_(options) {
  if (options_.comm_dtype != DType::f32 && options_.comm_dtype != DType::f16 && options_.comm_dtype != DType::bf16)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "gradients travel in f32, f16 or bf16, not " + std::string(dtype_name(options_.comm_dtype)));
  std::map<std::vector<int>, size_t> index;
  std::map<size_t, size_t> open;
  // In backward order: the head's layer first, the embedding's last.
  for (auto it = placement_.holders.rbegin(); it != placement_.holders.rend(); ++it)
    add_layer(index, open, it->first, layer_gradient_bytes(model_description, it->first));
  // A bucket is ready when its last (lowest) layer is: every rank takes them in that order.
  std::stable_sort(buckets_.begin(), buckets_.end(), [](const Bucket& a, const Bucket& b) {
    return a.layers.back() != b.layers.back() ? a.layers.back() > b.layers.back() : a.created < b.created;
  });
  // Collective over the world, in the same order on every rank; single-rank groups need none.
  for (Group& group : groups_) {
    if (group.ranks.size() < 2) continue;
    group.comm = world_.split(contains(group.ranks, world_.rank()) ? 0 : -1, world_.rank());
  }
  for (size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& bucket = buckets_[i];
    bucket.mine = bucket.mine && groups_[bucket.group].comm.valid();
    if (!bucket.mine) continue;
    if (sharded()) {
      make_slice(bucket);
    }
    // Neighbouring parameters (the layers' come in descending order, each layer's ascending) make
    // one range: one message.
    std::sort(bucket.ranges.begin(), bucket.ranges.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (auto range : bucket.ranges)
      if (!merged.empty() && merged.back().second == range.first)
        merged.back().second = range.second;
      else
        merged.push_back(range);
    bucket.ranges = std::move(merged);
    mine_.push_back(i);
    for (int layer : bucket.layers) by_layer_[layer].push_back(i);
    bucket.ready.emplace(stream_.device().create_event(/*timing=*/false));
  }
  if (mine_.empty()) return;
  comm_stream_.emplace(stream_.device().create_stream());
  next_ = summed_ = mine_.size();  // nothing to do before the first step
  thread_ = std::thread([this] { run_thread(); });
}

GradientSync::~GradientSync() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t GradientSync::group_of(std::map<std::vector<int>, size_t>& index, const std::vector<int>& ranks) {
  auto [it, fresh] = index.try_emplace(ranks, groups_.size());
  if (fresh) groups_.push_back({ranks, {}});
  return it->second;
}

GradientSync::Bucket& GradientSync::bucket_for(std::map<size_t, size_t>& open, size_t group, int layer,
                                               double layer_bytes) {
  if (auto it = open.find(group); it != open.end()) {
    Bucket& bucket = buckets_[it->second];
    if (bucket.layers.back() == layer) return bucket;  // another piece of the same layer
    if (bucket.bytes + layer_bytes <= static_cast<double>(options_.bucket_bytes)) {
      bucket.layers.push_back(layer);
      bucket.bytes += layer_bytes;
      return bucket;
    }
  }
  Bucket bucket;
  bucket.group = group;
  bucket.layers = {layer};
  bucket.bytes = layer_bytes;
  bucket.created = buckets_.size();
  bucket.mine = contains(groups_[group].ranks, world_.rank());
  open[group] = buckets_.size();
  buckets_.push_back(std::move(bucket));
  return buckets_.back();
}

// Adds `layer`'s pieces to their groups' buckets (every rank, for the order), and this rank's parts.
void GradientSync::add_layer(std::map<std::vector<int>, size_t>& index, std::map<size_t, size_t>& open, int layer,
                             double layer_bytes) {
  const int pieces = placement_.pieces.at(layer);
  const bool holds = contains(placement_.holders.at(layer), world_.rank());
  const bool uniform = placement_.uniform_degree(layer);
  // Only blocks are cut over tensor-parallel ranks (the embedding and the head are whole): a mixed
  // embedding or head has no pieces to sum, only its whole parameters below.
  const bool cut = layer >= 0 && layer < placement_.model_layers;
  for (int piece = 0; piece < (uniform || cut ? pieces : 0); ++piece) {
    const size_t group = group_of(index, placement_.piece_holders.at({layer, piece}));
    Bucket& bucket = bucket_for(open, group, layer, layer_bytes);
    if (!holds || !bucket.mine) continue;
    for (size_t i = 0; i < model_.parameters().size(); ++i) {
      const Parameter& p = model_.parameters()[i];
      if (p.layer != layer) continue;
      if (uniform && !sharded()) {  // the rank's whole shard, whole parameters included: a range of the flat buffer
        add_range(bucket, p);
      } else if (uniform) {
        // A whole parameter's tensor-parallel copies are alike: one of them enters the norm.
        add_part(bucket, {.parameter = i, .counted = p.sharding.sharded() || role_.tp_rank == 0});
      } else if (p.sharding.sharded()) {
        for (const Part& part : piece_parts(i, p, pieces, role_.tp, role_.tp_rank, piece)) add_part(bucket, part);
      }
    }
  }
  if (uniform) return;
  // A mixed layer's whole parameters: every holder, its copy weighted by 1 / its degree.
  const size_t group = group_of(index, placement_.holders.at(layer));
  Bucket& bucket = bucket_for(open, group, layer, layer_bytes);
  if (!holds) return;
  for (size_t i = 0; i < model_.parameters().size(); ++i) {
    const Parameter& p = model_.parameters()[i];
    if (p.layer == layer && !p.sharding.sharded()) add_part(bucket, {.parameter = i, .weight = 1.0 / role_.tp});
  }
}

void GradientSync::add_part(Bucket& bucket, Part part) {
  bucket.part_elements += part.of(model_.parameters()[part.parameter].grad).numel();
  bucket.parts.push_back(part);
}

// The ranges (as flat views) and then the parts of the bucket's gradients, weighted, as they are packed.
std::vector<WeightedView> GradientSync::gradient_views(const Bucket& bucket) const {
  std::vector<WeightedView> views;
  for (auto [begin, end] : bucket.ranges) views.push_back({model_.flat_grads().slice(0, begin, end)});
  for (const Part& part : bucket.parts)
    views.push_back({part.of(model_.parameters()[part.parameter].grad), part.weight});
  return views;
}

// This rank's slice of a bucket: block `rank` of the group's size of the packed parts, and which part
// each stretch of it belongs to.
void GradientSync::make_slice(Bucket& bucket) {
  Slice slice;
  slice.comm = &groups_[bucket.group].comm;
  slice.parts = bucket.parts;
  const int64_t n = slice.comm->size();
  slice.size = (bucket.part_elements + n - 1) / n;
  slice.length = slice.size * n;
  slice.begin = slice.comm->rank() * slice.size;
  slice.grad = Tensor::empty(stream_, {slice.size}, DType::f32);
  int64_t offset = 0;
  for (size_t k = 0; k < slice.parts.size(); ++k) {
    const Parameter& p = model_.parameters()[slice.parts[k].parameter];
    const int64_t elements = slice.parts[k].of(p.grad).numel();
    const int64_t from = std::max(offset, slice.begin), to = std::min(offset + elements, slice.begin + slice.size);
    if (from < to) slice.segments.push_back({k, from - slice.begin, to - from, p.grad.rank() >= 2});
    offset += elements;
    sliced_parameters_.insert(slice.parts[k].parameter);
  }
  bucket.slice = slices_.size();
  slices_.push_back(std::move(slice));
}

void GradientSync::add_range(Bucket& bucket, const Parameter& p) {
  bucket.ranges.emplace_back(p.grad_offset, p.grad_offset + p.grad.numel());
  bucket.range_elements += p.grad.numel();
}

void GradientSync::begin_step() {
  std::lock_guard lock(mutex_);
  for (size_t i : mine_) {
    buckets_[i].layers_left = buckets_[i].layers.size();
    buckets_[i].started = false;
  }
  next_ = summed_ = 0;
  comm_s_ = 0;
}

void GradientSync::layer_done(int layer) {
  if (!options_.overlap) return;
  auto found = by_layer_.find(layer);
  if (found == by_layer_.end()) return;
  std::lock_guard lock(mutex_);
  for (size_t i : found->second)
    if (--buckets_[i].layers_left == 0) start_locked(buckets_[i]);
}

void GradientSync::start_locked(Bucket& bucket) {
  bucket.ready->record(stream_);
  bucket.started = true;
  changed_.notify_all();
}

GradientSync::StepTimes GradientSync::finish() {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  std::unique_lock lock(mutex_);
  for (size_t i : mine_)
    if (!buckets_[i].started) start_locked(buckets_[i]);
  changed_.wait(lock, [&] { return summed_ == mine_.size() || error_; });
  if (error_) std::rethrow_exception(error_);
  return {comm_s_, seconds_between(start, Timeline::Clock::now())};
}

void GradientSync::run_thread() {
  for (;;) {
    Bucket* bucket = nullptr;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stop_ || (next_ < mine_.size() && buckets_[mine_[next_]].started); });
      if (stop_) return;
      bucket = &buckets_[mine_[next_++]];
    }
    Timeline::Clock::time_point start;
    try {
      // Waited for here, on this thread, so that the time below is the sum's, not the backward's.
      bucket->ready->synchronize();
      start = Timeline::Clock::now();
      sum(*bucket);
      comm_stream_->synchronize();
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
      return;
    }
    const Timeline::Clock::time_point end = Timeline::Clock::now();
    timeline_.add(sharded() ? "reduce-scatter gradients" : "allreduce gradients", "comm", start, end,
                  {{"layers", bucket->layers},
                   {"ranks", groups_[bucket->group].ranks},
                   {"elements", bucket->range_elements + bucket->part_elements},
                   {"dtype", std::string(dtype_name(options_.comm_dtype))}},
                  Timeline::kGradientThread);
    std::lock_guard lock(mutex_);
    comm_s_ += seconds_between(start, end);
    ++summed_;
    changed_.notify_all();
  }
}

void GradientSync::sum(Bucket& bucket) {
  Stream& stream = *comm_stream_;
  const dicomm::Communicator& comm = groups_[bucket.group].comm;
  if (sharded()) {
    // Each member keeps the sums of its block only.
    Slice& slice = slices_[bucket.slice];
    const Tensor buffer = pack(stream, gradient_views(bucket), slice.length, options_.comm_dtype);
    if (options_.comm_dtype == DType::f32) {
      comm.reduce_scatter(stream, buffer, slice.grad, dicomm::ReduceOp::sum);
    } else {
      const Tensor mine = Tensor::empty(stream, {slice.size}, options_.comm_dtype);
      comm.reduce_scatter(stream, buffer, mine, dicomm::ReduceOp::sum, dicomm::Accumulation::narrow);
      ops::copy(stream, mine, slice.grad);
    }
    return;
  }
  if (options_.comm_dtype == DType::f32) {
    for (auto [begin, end] : bucket.ranges)
      comm.allreduce(stream, model_.flat_grads().slice(0, begin, end), dicomm::ReduceOp::sum);
    if (bucket.parts.empty()) return;
  }
  // Strided pieces, weighted parts and 16-bit messages (the ranges too): packed into one buffer,
  // summed, unpacked.
  std::vector<WeightedView> views = gradient_views(bucket);
  if (options_.comm_dtype == DType::f32)
    views.erase(views.begin(), views.begin() + static_cast<std::ptrdiff_t>(bucket.ranges.size()));
  const Tensor buffer = pack(stream, views, elements_of(views), options_.comm_dtype);
  // 16-bit messages all the way: each receiver adds in f32 and rounds (the point is the bytes).
  comm.allreduce(stream, buffer, dicomm::ReduceOp::sum, dicomm::Accumulation::narrow);
  unpack(stream, buffer, tensors_of(views));
}

}  // namespace h2::heteropp
