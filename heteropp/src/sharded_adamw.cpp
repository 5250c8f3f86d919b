#include "sharded_adamw.hpp"

#include "h2/ops.hpp"

namespace h2::heteropp {

namespace {

std::vector<Tensor> plain(const std::vector<WeightedView>& views) {
  std::vector<Tensor> tensors;
  for (const WeightedView& v : views) tensors.push_back(v.view);
  return tensors;
}

}  // namespace

ShardedAdamW::ShardedAdamW(GptStage& model, GradientSync& sync, Stream& stream, Timeline& timeline,
                           const AdamWSettings& settings)
    : model_(model), sync_(sync), stream_(stream), timeline_(timeline), settings_(settings) {
  if (!sync_.sharded()) throw Error(H2_STATUS_INTERNAL, "ShardedAdamW needs GradientSync's sharded mode");
  for (const GradientSync::Slice& slice : sync_.slices()) {
    exp_avg_.push_back(Tensor::empty(stream_, {slice.size}, DType::f32));
    exp_avg_sq_.push_back(Tensor::empty(stream_, {slice.size}, DType::f32));
    ops::fill(stream_, exp_avg_.back(), 0);
    ops::fill(stream_, exp_avg_sq_.back(), 0);
  }
}

std::vector<WeightedView> ShardedAdamW::views(const GradientSync::Slice& slice,
                                              const std::function<Tensor(size_t)>& tensor) const {
  std::vector<WeightedView> out;
  for (const GradientSync::Part& part : slice.parts) out.push_back({part.of(tensor(part.parameter))});
  return out;
}

void ShardedAdamW::step(double lr, double grad_scale, int64_t step) {
  const auto master = [&](size_t i) { return model_.parameters()[i].master; };
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    const std::vector<WeightedView> masters = views(slice, master);
    const Tensor packed = pack(stream_, masters, slice.length, DType::f32);
    const Tensor mine = packed.slice(0, slice.begin, slice.begin + slice.size);
    // One call per weight-decay class, over the slice's stretches of that class.
    for (bool decay : {false, true}) {
      std::vector<Tensor> params, grads, m, v, copies;
      for (const GradientSync::Slice::Segment& s : slice.segments) {
        if (s.decay != decay) continue;
        params.push_back(mine.slice(0, s.offset, s.offset + s.elements));
        grads.push_back(slice.grad.slice(0, s.offset, s.offset + s.elements));
        m.push_back(exp_avg_[k].slice(0, s.offset, s.offset + s.elements));
        v.push_back(exp_avg_sq_[k].slice(0, s.offset, s.offset + s.elements));
        copies.emplace_back();
      }
      if (params.empty()) continue;
      ops::adamw(stream_, params, grads, m, v, copies, settings_.options(lr, decay, grad_scale, step));
    }
    // Every member's updated block, gathered whole, back into the masters.
    const Tensor updated = Tensor::empty(stream_, {slice.size}, DType::f32);
    ops::copy(stream_, mine, updated);
    const Timeline::Clock::time_point start = Timeline::Clock::now();
    slice.comm->allgather(stream_, updated, packed);
    timeline_.add("allgather masters", "comm", start, Timeline::Clock::now(), {{"elements", slice.length}});
    unpack(stream_, packed, plain(masters));
  }
  model_.copy_masters_to_values();
}

size_t ShardedAdamW::state_bytes() const {
  size_t bytes = 0;
  for (const Tensor& m : exp_avg_) bytes += 2 * static_cast<size_t>(m.numel()) * sizeof(float);
  return bytes;
}

std::vector<Tensor> ShardedAdamW::gradients() const {
  std::vector<Tensor> out;
  for (const GradientSync::Slice& slice : sync_.slices()) out.push_back(slice.grad);
  return out;
}

std::vector<Tensor> ShardedAdamW::counted_gradients() const {
  std::vector<Tensor> out;
  for (const GradientSync::Slice& slice : sync_.slices())
    for (const GradientSync::Slice::Segment& s : slice.segments)
      if (slice.parts[s.part].counted) out.push_back(slice.grad.slice(0, s.offset, s.offset + s.elements));
  return out;
}

ShardedAdamW::Moments ShardedAdamW::empty_moments() const {
  Moments moments;
  for (const GradientSync::Slice& slice : sync_.slices())
    for (const GradientSync::Part& part : slice.parts)
      if (!moments.count(part.parameter)) {
        const Shape& shape = model_.parameters()[part.parameter].master.shape();
        moments[part.parameter] = {Tensor::empty(stream_, shape, DType::f32),
                                   Tensor::empty(stream_, shape, DType::f32)};
      }
  return moments;
}

ShardedAdamW::Moments ShardedAdamW::gather_moments() {
  Moments whole = empty_moments();
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    for (bool second : {false, true}) {
      const Tensor packed = Tensor::empty(stream_, {slice.length}, DType::f32);
      slice.comm->allgather(stream_, second ? exp_avg_sq_[k] : exp_avg_[k], packed);
      unpack(stream_, packed,
             plain(views(slice, [&](size_t i) { return second ? whole.at(i).second : whole.at(i).first; })));
    }
  }
  return whole;
}

void ShardedAdamW::scatter_moments(const Moments& whole) {
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    for (bool second : {false, true}) {
      const Tensor packed =
          pack(stream_, views(slice, [&](size_t i) { return second ? whole.at(i).second : whole.at(i).first; }),
               slice.length, DType::f32);
      ops::copy(stream_, packed.slice(0, slice.begin, slice.begin + slice.size), second ? exp_avg_sq_[k] : exp_avg_[k]);
    }
  }
}

}  // namespace h2::heteropp
