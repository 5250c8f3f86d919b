// attention and attention_backward from batched matmuls, for libraries whose fused attention takes
// other layouts (CNNL's is packed variable-length). Everything runs in FP32: q, k, v (any strides)
// are copied to contiguous FP32 with the query heads that share a kv head stacked, [batch * kv_heads,
// group * seq_q, dim], so one batched matmul serves a whole group and the backward's dk and dv sum
// over the group by the matmul itself. The forward keeps the row statistics the ABI asks for
// (lse = max + log(sum of exp(score - max))); a row with every key masked gives o = 0 and lse = -inf.
#include <limits>

#include "composed_ops.hpp"
#include "tensor_views.hpp"

namespace h2::plugin::composed {
namespace {

using Scratch = std::unique_ptr<DeviceMath::Scratch>;
constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The sizes of one attention call.
struct Geometry {
  explicit Geometry(const H2_Tensor& q, const H2_Tensor& k)
      : batch(q.shape[0]),
        heads(q.shape[1]),
        kv_heads(k.shape[1]),
        group(heads / kv_heads),
        seq_q(q.shape[2]),
        seq_k(k.shape[2]),
        dim(q.shape[3]) {}
  int64_t batch, heads, kv_heads, group, seq_q, seq_k, dim;
  int64_t slices() const { return batch * kv_heads; }
  int64_t rows() const { return group * seq_q; }
};

// A [batch, heads, seq, dim] tensor seen as [batch, kv_heads, group, seq, dim]: heads split.
H2_Tensor split_heads(H2_Tensor t, int64_t kv_heads) {
  const int64_t group = t.shape[1] / kv_heads;
  H2_Tensor v = t;
  v.rank = 5;
  v.shape[0] = t.shape[0];
  v.strides[0] = t.strides[0];
  v.shape[1] = kv_heads;
  v.strides[1] = t.strides[1] * group;
  v.shape[2] = group;
  v.strides[2] = t.strides[1];
  v.shape[3] = t.shape[2];
  v.strides[3] = t.strides[2];
  v.shape[4] = t.shape[3];
  v.strides[4] = t.strides[3];
  return v;
}

// Query-side tensors (q, o, dout, dq) to and from [slices, rows, dim] FP32.
Scratch stacked_queries(DeviceMath& math, const Geometry& g, const H2_Tensor& t) {
  Scratch s = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  math.copy(reshaped(s->tensor, {g.batch, g.kv_heads, g.group, g.seq_q, g.dim}), split_heads(t, g.kv_heads));
  return s;
}
void unstack_queries(DeviceMath& math, const Geometry& g, const H2_Tensor& to, const Scratch& from) {
  math.copy(split_heads(to, g.kv_heads), reshaped(from->tensor, {g.batch, g.kv_heads, g.group, g.seq_q, g.dim}));
}
// Key-side tensors (k, v, dk, dv) to and from [slices, seq_k, dim] FP32.
Scratch stacked_keys(DeviceMath& math, const Geometry& g, const H2_Tensor& t) {
  Scratch s = math.scratch(H2_DTYPE_F32, {g.slices(), g.seq_k, g.dim});
  math.copy(reshaped(s->tensor, {g.batch, g.kv_heads, g.seq_k, g.dim}), t);
  return s;
}

// The per-row lse [batch, heads, seq_q] as [slices, rows, 1] and back.
H2_Tensor lse_view(const H2_Tensor& lse, int64_t kv_heads) {
  H2_Tensor v = lse;  // [batch, heads, seq_q] -> [batch, kv_heads, group, seq_q]
  const int64_t group = lse.shape[1] / kv_heads;
  v.rank = 4;
  v.shape[3] = lse.shape[2];
  v.strides[3] = lse.strides[2];
  v.shape[2] = group;
  v.strides[2] = lse.strides[1];
  v.shape[1] = kv_heads;
  v.strides[1] = lse.strides[1] * group;
  return v;
}

// scores [slices, rows, seq_k] = scale * q k^T, with the causal mask's entries -inf.
Scratch masked_scores(DeviceMath& math, const Geometry& g, const Scratch& q, const Scratch& k, double scale,
                      bool causal) {
  Scratch scores = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.seq_k});
  math.bmm(scores->tensor, q->tensor, transposed(k->tensor), scale);
  if (causal) {
    Scratch mask = math.scratch(H2_DTYPE_BOOL, {g.seq_q, g.seq_k});
    causal_mask(math, mask->tensor);
    // The [seq_q, seq_k] mask broadcast over the slices and the group.
    H2_Tensor broadcast = reshaped(mask->tensor, {1, 1, g.seq_q, g.seq_k});
    broadcast.shape[0] = g.slices();
    broadcast.strides[0] = 0;
    broadcast.shape[1] = g.group;
    broadcast.strides[1] = 0;
    math.masked_fill(reshaped(scores->tensor, {g.slices(), g.group, g.seq_q, g.seq_k}), broadcast, -kInfinity);
  }
  return scores;
}

// Replaces `value` in t by `replacement` (the fully masked rows' infinities).
void replace(DeviceMath& math, const H2_Tensor& t, double value, double replacement) {
  Scratch found = math.scratch(H2_DTYPE_BOOL, shape_of(t));
  math.equal(found->tensor, t, value);
  math.masked_fill(t, found->tensor, replacement);
}

}  // namespace

void attention(DeviceMath& math, const H2_AttentionArgs& args) {
  const Geometry g(args.q, args.k);
  const Scratch q = stacked_queries(math, g, args.q), k = stacked_keys(math, g, args.k);
  const Scratch v = stacked_keys(math, g, args.v);
  const Scratch scores = masked_scores(math, g, q, k, args.scale, args.causal != 0);
  Scratch top = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  Scratch total = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  Scratch lse = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  math.reduce(DeviceMath::Reduce::max, top->tensor, scores->tensor, {2}, true);
  replace(math, top->tensor, -kInfinity, 0.0);  // a fully masked row: exp(-inf - 0) = 0 below
  math.add(scores->tensor, scores->tensor, top->tensor, -1.0);
  math.unary(DeviceMath::Unary::exp, scores->tensor, scores->tensor);
  math.reduce(DeviceMath::Reduce::sum, total->tensor, scores->tensor, {2}, true);
  math.unary(DeviceMath::Unary::log, lse->tensor, total->tensor);  // log(0) = -inf for a masked row
  math.add(lse->tensor, lse->tensor, top->tensor, 1.0);
  math.copy(lse_view(args.lse, g.kv_heads), reshaped(lse->tensor, {g.batch, g.kv_heads, g.group, g.seq_q}));
  replace(math, total->tensor, 0.0, 1.0);  // its probabilities 0 / 1 = 0
  math.binary(H2_BINARY_DIV, scores->tensor, scores->tensor, total->tensor);
  Scratch out = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  math.bmm(out->tensor, scores->tensor, v->tensor, 1.0);
  unstack_queries(math, g, args.o, out);
}

void attention_backward(DeviceMath& math, const H2_AttentionBackwardArgs& args) {
  const Geometry g(args.q, args.k);
  const Scratch q = stacked_queries(math, g, args.q), k = stacked_keys(math, g, args.k);
  const Scratch v = stacked_keys(math, g, args.v), o = stacked_queries(math, g, args.o);
  const Scratch dout = stacked_queries(math, g, args.dout);
  // p = exp(scores - lse), recomputed; a fully masked row (lse = -inf) has p = exp(-inf - inf) = 0.
  const Scratch p = masked_scores(math, g, q, k, args.scale, args.causal != 0);
  Scratch lse = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  math.copy(reshaped(lse->tensor, {g.batch, g.kv_heads, g.group, g.seq_q}), lse_view(args.lse, g.kv_heads));
  replace(math, lse->tensor, -kInfinity, kInfinity);
  math.add(p->tensor, p->tensor, lse->tensor, -1.0);
  math.unary(DeviceMath::Unary::exp, p->tensor, p->tensor);
  // ds = scale * p * (dout v^T - rowsum(dout * o)).
  Scratch ds = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.seq_k});
  Scratch delta = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  Scratch product = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  math.bmm(ds->tensor, dout->tensor, transposed(v->tensor), 1.0);
  math.binary(H2_BINARY_MUL, product->tensor, dout->tensor, o->tensor);
  math.reduce(DeviceMath::Reduce::sum, delta->tensor, product->tensor, {2}, true);
  math.add(ds->tensor, ds->tensor, delta->tensor, -1.0);
  math.binary(H2_BINARY_MUL, ds->tensor, ds->tensor, p->tensor);
  math.scale(ds->tensor, ds->tensor, args.scale);
  // dq = ds k; dk = ds^T q and dv = p^T dout, summed over the group by the stacked rows.
  Scratch dq = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  Scratch dk = math.scratch(H2_DTYPE_F32, {g.slices(), g.seq_k, g.dim});
  Scratch dv = math.scratch(H2_DTYPE_F32, {g.slices(), g.seq_k, g.dim});
  math.bmm(dq->tensor, ds->tensor, k->tensor, 1.0);
  math.bmm(dk->tensor, transposed(ds->tensor), q->tensor, 1.0);
  math.bmm(dv->tensor, transposed(p->tensor), dout->tensor, 1.0);
  unstack_queries(math, g, args.dq, dq);
  math.copy(args.dk, reshaped(dk->tensor, {g.batch, g.kv_heads, g.seq_k, g.dim}));
  math.copy(args.dv, reshaped(dv->tensor, {g.batch, g.kv_heads, g.seq_k, g.dim}));
}

}  // namespace h2::plugin::composed
