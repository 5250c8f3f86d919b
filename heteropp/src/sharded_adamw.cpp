#include "sharded_adamw.hpp"

#include <algorithm>

#include "h2/ops.hpp"

namespace h2::heteropp {

ShardedAdamW::ShardedAdamW(GptStage& model, GradientSync& sync, Stream& stream, Timeline& timeline,
                           const AdamWSettings& settings)
    : model_(model),
      sync_(sync),
      stream_(stream),
      timeline_(timeline),
      settings_(settings),
      keeps_masters_(model.config().dtype != DType::f32) {
  if (!sync_.sharded()) throw Error(H2_STATUS_INTERNAL, "ShardedAdamW needs GradientSync's sharded mode");
  for (const GradientSync::Slice& slice : sync_.slices()) {
    if (keeps_masters_) {
      const Tensor packed = pack(stream_, views(slice, [&](size_t i) { return model_.parameters()[i].master; }),
                                 slice.length, DType::f32);
      master_.push_back(Tensor::empty(stream_, {slice.size}, DType::f32));
      ops::copy(stream_, packed.slice(0, slice.begin, slice.begin + slice.size), master_.back());
      gather_layouts_.push_back(gather_layout(slice));
    }
    exp_avg_.push_back(Tensor::empty(stream_, {slice.size}, DType::f32));
    exp_avg_sq_.push_back(Tensor::empty(stream_, {slice.size}, DType::f32));
    ops::fill(stream_, exp_avg_.back(), 0);
    ops::fill(stream_, exp_avg_sq_.back(), 0);
  }
  // A 16-bit weight's whole f32 master is now in the slices (the copies above are ordered before any
  // reuse of its memory on the stream).
  for (const GradientSync::Slice& slice : sync_.slices())
    for (const GradientSync::Part& part : slice.parts) {
      Parameter& p = model_.parameters()[part.parameter];
      if (p.master.defined() && !p.value.same_view(p.master)) p.master = Tensor();
    }
}

std::vector<WeightedView> ShardedAdamW::views(const GradientSync::Slice& slice,
                                              const std::function<Tensor(size_t)>& tensor) const {
  std::vector<WeightedView> out;
  for (const GradientSync::Part& part : slice.parts) out.push_back({part.of(tensor(part.parameter))});
  return out;
}

Tensor ShardedAdamW::weight(size_t parameter) const {
  const Parameter& p = model_.parameters()[parameter];
  return p.master.defined() ? p.master : p.value;
}

ShardedAdamW::GatherLayout ShardedAdamW::gather_layout(const GradientSync::Slice& slice) const {
  GatherLayout layout;
  const int64_t members = slice.length / slice.size;
  layout.runs.resize(static_cast<size_t>(members));
  std::vector<int64_t> narrow(static_cast<size_t>(members), 0), wide(narrow);
  // The parts lie one after another in the packed order; each member's range cuts them into runs.
  int64_t start = 0;
  for (const GradientSync::Part& part : slice.parts) {
    // The value's dtype is what travels (the master is f32 for every parameter).
    const Tensor& value = model_.parameters()[part.parameter].value;
    const int64_t end = start + part.of(value).numel();
    const bool is_wide = value.dtype() == DType::f32;
    for (int64_t m = start / slice.size; m < members && m * slice.size < end && start < end; ++m) {
      const int64_t from = std::max(start, m * slice.size), to = std::min(end, (m + 1) * slice.size);
      int64_t& count = (is_wide ? wide : narrow)[static_cast<size_t>(m)];
      layout.runs[static_cast<size_t>(m)].push_back({from - m * slice.size, to - from, count, is_wide});
      count += to - from;
    }
    start = end;
  }
  layout.narrow = *std::max_element(narrow.begin(), narrow.end());
  layout.wide = *std::max_element(wide.begin(), wide.end());
  return layout;
}

void ShardedAdamW::gather_sixteen_bit(size_t k, const Tensor& masters, const std::vector<WeightedView>& weights) {
  const GradientSync::Slice& slice = sync_.slices()[k];
  const GatherLayout& layout = gather_layouts_[k];
  const int64_t members = slice.length / slice.size, me = slice.begin / slice.size;
  const DType narrow_dtype = model_.config().dtype;
  // This member's chunk of each kind: its masters rounded into 16 bits, or as they are.
  const Tensor mine[2] = {Tensor::empty(stream_, {std::max<int64_t>(layout.narrow, 1)}, narrow_dtype),
                          Tensor::empty(stream_, {std::max<int64_t>(layout.wide, 1)}, DType::f32)};
  for (const GatherLayout::Run& run : layout.runs[static_cast<size_t>(me)])
    ops::copy(stream_, masters.slice(0, run.offset, run.offset + run.elements),
              mine[run.wide].slice(0, run.at, run.at + run.elements));
  const int64_t chunk[2] = {layout.narrow, layout.wide};
  Tensor all[2];
  for (int kind = 0; kind < 2; ++kind) {
    if (chunk[kind] == 0) continue;  // the same on every member: none of them gathers
    all[kind] = Tensor::empty(stream_, {members * chunk[kind]}, mine[kind].dtype());
    allgather_weights(slice, mine[kind].slice(0, 0, chunk[kind]), all[kind]);
  }
  // Every member's runs back into the packed order (exact: 16-bit values widen without rounding), then
  // into the weights, where the 16-bit ones take those values unchanged.
  const Tensor packed = Tensor::empty(stream_, {slice.length}, DType::f32);
  for (int64_t m = 0; m < members; ++m)
    for (const GatherLayout::Run& run : layout.runs[static_cast<size_t>(m)]) {
      const int64_t from = m * chunk[run.wide] + run.at, to = m * slice.size + run.offset;
      ops::copy(stream_, all[run.wide].slice(0, from, from + run.elements), packed.slice(0, to, to + run.elements));
    }
  unpack(stream_, packed, tensors_of(weights));
}

void ShardedAdamW::allgather_weights(const GradientSync::Slice& slice, const Tensor& mine, const Tensor& all) {
  const Timeline::Clock::time_point start = Timeline::Clock::now();
  slice.comm->allgather(stream_, mine, all);
  timeline_.add("allgather weights", "comm", start, Timeline::Clock::now(),
                {{"elements", all.numel()}, {"bytes", all.numel() * static_cast<int64_t>(dtype_size(all.dtype()))}});
}

void ShardedAdamW::step(double lr, double grad_scale, int64_t step) {
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    const std::vector<WeightedView> weights = views(slice, [&](size_t i) { return weight(i); });
    // An f32 model's masters are its weights: this rank's slice of them, packed.
    const Tensor packed = keeps_masters_ ? Tensor() : pack(stream_, weights, slice.length, DType::f32);
    const Tensor masters = keeps_masters_ ? master_[k] : packed.slice(0, slice.begin, slice.begin + slice.size);
    // One call per weight-decay class, over the slice's stretches of that class.
    for (bool decay : {false, true}) {
      std::vector<Tensor> params, grads, m, v, copies;
      for (const GradientSync::Slice::Segment& s : slice.segments) {
        if (s.decay != decay) continue;
        params.push_back(masters.slice(0, s.offset, s.offset + s.elements));
        grads.push_back(slice.grad.slice(0, s.offset, s.offset + s.elements));
        m.push_back(exp_avg_[k].slice(0, s.offset, s.offset + s.elements));
        v.push_back(exp_avg_sq_[k].slice(0, s.offset, s.offset + s.elements));
        copies.emplace_back();
      }
      if (params.empty()) continue;
      ops::adamw(stream_, params, grads, m, v, copies, settings_.options(lr, decay, grad_scale, step));
    }
    // Every member's updated masters, gathered whole, into the weights.
    if (keeps_masters_) {
      gather_sixteen_bit(k, masters, weights);
      continue;
    }
    const Tensor updated = Tensor::empty(stream_, {slice.size}, DType::f32);
    ops::copy(stream_, masters, updated);  // the gather's input is not its output
    allgather_weights(slice, updated, packed);
    unpack(stream_, packed, tensors_of(weights));
  }
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

size_t ShardedAdamW::state_bytes() const {
  size_t bytes = 0;
  for (const Tensor& m : exp_avg_) bytes += (keeps_masters_ ? 3 : 2) * static_cast<size_t>(m.numel()) * sizeof(float);
  return bytes;
}

ShardedAdamW::State ShardedAdamW::empty_state() const {
  State state;
  for (const GradientSync::Slice& slice : sync_.slices())
    for (const GradientSync::Part& part : slice.parts)
      if (!state.count(part.parameter)) {
        const Shape& shape = model_.parameters()[part.parameter].grad.shape();
        state[part.parameter] = {Tensor::empty(stream_, shape, DType::f32), Tensor::empty(stream_, shape, DType::f32),
                                 Tensor::empty(stream_, shape, DType::f32)};
      }
  return state;
}

namespace {

// A parameter's state, in the order of the slices' tensors (master_, exp_avg_, exp_avg_sq_).
constexpr Tensor ShardedAdamW::Whole::*kMembers[] = {&ShardedAdamW::Whole::master, &ShardedAdamW::Whole::exp_avg,
                                                     &ShardedAdamW::Whole::exp_avg_sq};

}  // namespace

ShardedAdamW::State ShardedAdamW::gather_state() {
  State whole = empty_state();
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    const Tensor* mine[] = {keeps_masters_ ? &master_[k] : nullptr, &exp_avg_[k], &exp_avg_sq_[k]};
    for (int which = 0; which < 3; ++which) {
      if (mine[which] == nullptr) {  // an f32 model's masters: its weights, whole already
        for (const GradientSync::Part& part : slice.parts)
          ops::copy(stream_, part.of(weight(part.parameter)), part.of(whole.at(part.parameter).master));
        continue;
      }
      const Tensor packed = Tensor::empty(stream_, {slice.length}, DType::f32);
      slice.comm->allgather(stream_, *mine[which], packed);
      unpack(stream_, packed, tensors_of(views(slice, [&](size_t i) { return whole.at(i).*kMembers[which]; })));
    }
  }
  return whole;
}

void ShardedAdamW::scatter_state(const State& whole) {
  for (size_t k = 0; k < sync_.slices().size(); ++k) {
    const GradientSync::Slice& slice = sync_.slices()[k];
    Tensor* mine[] = {keeps_masters_ ? &master_[k] : nullptr, &exp_avg_[k], &exp_avg_sq_[k]};
    for (int which = 0; which < 3; ++which) {
      if (mine[which] == nullptr) continue;  // set with the weights below
      const Tensor packed =
          pack(stream_, views(slice, [&](size_t i) { return whole.at(i).*kMembers[which]; }), slice.length, DType::f32);
      ops::copy(stream_, packed.slice(0, slice.begin, slice.begin + slice.size), *mine[which]);
    }
  }
  // The weights from the masters read.
  for (const auto& [i, state] : whole) ops::copy(stream_, state.master, weight(i));
}

}  // namespace h2::heteropp
