// embedding, rotary, cross_entropy and attention, forward and backward, at the model's widths.
#include <cmath>

#include "cases.hpp"

namespace h2::conformance {

namespace {

Case embedding_case(std::string name, DType dtype, int64_t vocab, int64_t dim, Shape ids, Kind index_kind) {
  Shape out = ids;
  out.push_back(dim);
  Case x{.op = "embedding", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "weight", .shape = {vocab, dim}},
               {.name = "indices", .shape = ids, .kind = index_kind, .fill = Fill::indices, .limit = vocab},
               {.name = "y", .shape = out, .role = Role::output}};
  x.run = [](Stream& s, const std::vector<Tensor>& t) { ops::embedding(s, t[0], t[1], t[2]); };
  return x;
}

Case rotary_case(std::string name, DType dtype, Shape shape, ops::RotaryOptions options, bool backward,
                 Layout layout = Layout::contiguous) {
  Case x{.op = "rotary", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = backward ? "dy" : "x", .shape = shape, .layout = layout},
               {.name = backward ? "dx" : "y", .shape = shape, .role = Role::output}};
  x.run = [options, backward](Stream& s, const std::vector<Tensor>& t) {
    if (backward) {
      ops::rotary_backward(s, t[0], t[1], options);
    } else {
      ops::rotary(s, t[0], t[1], options);
    }
  };
  // The angle position * frequency carries an fp32 error that grows with the position.
  const int64_t positions = shape[shape.size() - 3] + options.position_offset;
  x.n = positions;
  return x;
}

// The targets of `rows` rows of `vocab` logits. Every third one is the ignore_index (where one is set:
// below 0 or within the vocabulary), so ignored rows are there in every case, forward and backward,
// not by chance.
TensorSpec targets_spec(int64_t rows, int64_t vocab, const ops::CrossEntropyOptions& options) {
  TensorSpec targets{.name = "targets", .shape = {rows}, .kind = Kind::index, .fill = Fill::indices, .limit = vocab};
  if (options.ignore_index < vocab) targets.every_third = options.ignore_index;
  return targets;
}

Case cross_entropy_case(std::string name, DType dtype, int64_t rows, int64_t vocab, ops::CrossEntropyOptions options) {
  Case x{.op = "cross_entropy", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "logits", .shape = {rows, vocab}, .scale = 4},
               targets_spec(rows, vocab, options),
               {.name = "loss", .shape = {rows}, .role = Role::output, .kind = Kind::statistic},
               {.name = "lse", .shape = {rows}, .role = Role::output, .kind = Kind::statistic}};
  x.run = [options](Stream& s, const std::vector<Tensor>& t) {
    ops::cross_entropy(s, t[0], t[1], t[2], t[3], options);
  };
  x.n = vocab;
  return x;
}

Case cross_entropy_backward_case(std::string name, DType dtype, int64_t rows, int64_t vocab,
                                 ops::CrossEntropyOptions options) {
  Case x{.op = "cross_entropy_backward", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "logits", .shape = {rows, vocab}, .scale = 4},
               targets_spec(rows, vocab, options),
               {.name = "lse", .shape = {rows}, .kind = Kind::statistic, .fill = Fill::derived},
               {.name = "dloss", .shape = {rows}, .kind = Kind::statistic},
               {.name = "dlogits", .shape = {rows, vocab}, .role = Role::output}};
  x.prepare = [options, rows](Stream& s, const std::vector<Tensor>& t) {
    Tensor loss = Tensor::empty(t[0].device(), {rows}, t[2].dtype());
    ops::cross_entropy(s, t[0], t[1], loss, t[2], options);
  };
  x.run = [options](Stream& s, const std::vector<Tensor>& t) {
    ops::cross_entropy_backward(s, t[0], t[1], t[2], t[3], t[4], options);
  };
  x.n = vocab;
  return x;
}

// q [batch, heads, seq_q, dim] and k, v [batch, kv_heads, seq_k, dim]; with `bshd`, stored
// [batch, seq, heads, dim] and passed as permuted views, as a fused QKV projection leaves them.
struct AttentionShape {
  int64_t batch, heads, kv_heads, seq_q, seq_k, dim;
  Shape q() const { return {batch, heads, seq_q, dim}; }
  Shape kv() const { return {batch, kv_heads, seq_k, dim}; }
  Shape lse() const { return {batch, heads, seq_q}; }
};

Tensor maybe_bshd(const Tensor& t, bool bshd) {
  return bshd ? t.permute({0, 2, 1, 3}) : t;
}
Shape stored(Shape shape, bool bshd) {
  if (bshd) std::swap(shape[1], shape[2]);
  return shape;
}

Case attention_case(std::string name, DType dtype, AttentionShape a, bool causal, bool bshd) {
  const double scale = 1 / std::sqrt(static_cast<double>(a.dim));
  Case x{.op = "attention", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "q", .shape = stored(a.q(), bshd)},
               {.name = "k", .shape = stored(a.kv(), bshd)},
               {.name = "v", .shape = stored(a.kv(), bshd)},
               {.name = "o", .shape = a.q(), .role = Role::output},
               {.name = "lse", .shape = a.lse(), .role = Role::output, .kind = Kind::statistic}};
  x.run = [scale, causal, bshd](Stream& s, const std::vector<Tensor>& t) {
    ops::attention(s, maybe_bshd(t[0], bshd), maybe_bshd(t[1], bshd), maybe_bshd(t[2], bshd), t[3], t[4], scale,
                   causal);
  };
  x.n = a.seq_k + a.dim;
  return x;
}

Case attention_backward_case(std::string name, DType dtype, AttentionShape a, bool causal) {
  const double scale = 1 / std::sqrt(static_cast<double>(a.dim));
  Case x{.op = "attention_backward", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "q", .shape = a.q()},
               {.name = "k", .shape = a.kv()},
               {.name = "v", .shape = a.kv()},
               {.name = "o", .shape = a.q(), .fill = Fill::derived},
               {.name = "lse", .shape = a.lse(), .kind = Kind::statistic, .fill = Fill::derived},
               {.name = "dout", .shape = a.q()},
               {.name = "dq", .shape = a.q(), .role = Role::output},
               {.name = "dk", .shape = a.kv(), .role = Role::output},
               {.name = "dv", .shape = a.kv(), .role = Role::output}};
  x.prepare = [scale, causal](Stream& s, const std::vector<Tensor>& t) {
    ops::attention(s, t[0], t[1], t[2], t[3], t[4], scale, causal);
  };
  x.run = [scale, causal](Stream& s, const std::vector<Tensor>& t) {
    ops::attention_backward(s, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], scale, causal);
  };
  x.n = a.seq_q * (a.heads / a.kv_heads) + a.seq_k + a.dim;
  return x;
}

}  // namespace

void add_model_cases(CaseList& list, const Sizes& s, DType dtype) {
  auto& cases = list.cases;
  const int64_t t = s.tokens(), h = s.hidden, hd = s.head_dim();
  cases.push_back(embedding_case("tokens " + shape_name({s.batch, s.seq}) + " of " + shape_name({s.vocab, h}), dtype,
                                 s.vocab, h, {s.batch, s.seq}, Kind::index));
  cases.push_back(embedding_case("i32 indices", dtype, 50, 8, {13}, Kind::index32));
  {
    Case x{.op = "embedding_backward",
           .name = "tokens " + shape_name({t}) + " into " + shape_name({s.vocab, h}),
           .dtype = dtype};
    // Few distinct ids, so rows collect several positions each.
    x.tensors = {{.name = "indices", .shape = {t}, .kind = Kind::index, .fill = Fill::indices, .limit = 7},
                 {.name = "dy", .shape = {t, h}},
                 {.name = "dweight", .shape = {s.vocab, h}, .role = Role::output}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::embedding_backward(st, v[0], v[1], v[2]); };
    x.n = t;
    cases.push_back(x);
  }

  const Shape heads{s.batch, s.seq, s.heads, hd};
  cases.push_back(rotary_case("rotate half " + shape_name(heads), dtype, heads, {}, false));
  cases.push_back(rotary_case("interleaved, offset 100, base 500000", dtype, heads,
                              {.base = 500000, .position_offset = 100, .interleaved = true}, false));
  cases.push_back(rotary_case("backward " + shape_name(heads), dtype, heads, {.position_offset = 7}, true));
  cases.push_back(rotary_case("strided input", dtype, {2, 5, 3, 8}, {}, false, Layout::strided));
  cases.push_back(rotary_case("empty head dimension", dtype, {2, 5, 3, 0}, {}, false));

  cases.push_back(
      cross_entropy_case("vocabulary " + std::to_string(s.vocab) + ", ignored rows", dtype, t, s.vocab, {}));
  cases.push_back(cross_entropy_case("label smoothing 0.1, ignore index 3", dtype, 12, 40,
                                     {.ignore_index = 3, .label_smoothing = 0.1}));
  cases.push_back(
      cross_entropy_backward_case("vocabulary " + std::to_string(s.vocab) + ", ignored rows", dtype, t, s.vocab, {}));
  cases.push_back(cross_entropy_backward_case("label smoothing 0.1, ignore index 3", dtype, 12, 40,
                                              {.ignore_index = 3, .label_smoothing = 0.1}));

  const AttentionShape gqa{s.batch, s.heads, s.kv_heads, s.seq, s.seq, hd};
  cases.push_back(attention_case("causal grouped-query " + shape_name(gqa.q()), dtype, gqa, true, false));
  cases.push_back(attention_case("[batch, seq, heads, dim] memory", dtype, gqa, true, true));
  cases.push_back(attention_case("not causal, 3 queries on 11 keys", dtype, {1, 2, 1, 3, 11, 16}, false, false));
  cases.push_back(attention_case("causal, more queries than keys", dtype, {1, 2, 2, 5, 3, 8}, true, false));
  cases.push_back(attention_backward_case("causal grouped-query " + shape_name(gqa.q()), dtype, gqa, true));
  cases.push_back(attention_backward_case("not causal, 4 queries on 9 keys", dtype, {2, 2, 2, 4, 9, 8}, false));
}

}  // namespace h2::conformance
