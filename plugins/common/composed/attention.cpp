// attention and attention_backward from batched matmuls, for libraries whose fused attention takes
// other layouts (CNNL's is packed variable-length). Everything runs in FP32: q, k, v (any strides)
// are copied to contiguous FP32 with the query heads that share a kv head stacked, [batch * kv_heads,
// group * seq_q, dim], so one batched matmul serves a whole group and the backward's dk and dv sum
// over the group by the matmul itself. The forward keeps the row statistics the ABI asks for
// (lse = max + log(sum of exp(score - max))); a row with every key masked gives o = 0 and lse = -inf.
#include <cmath>
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

// An F32 0/1 indicator of `x == value` (or, with value NaN, of x being NaN or infinite).
Scratch indicator(DeviceMath& math, const H2_Tensor& x, double value) {
  Scratch found = math.scratch(H2_DTYPE_BOOL, shape_of(x)), as_float = math.scratch(H2_DTYPE_F32, shape_of(x));
  if (std::isnan(value))
    math.not_finite(found->tensor, x);
  else
    math.equal(found->tensor, x, value);
  math.copy(as_float->tensor, found->tensor);
  return as_float;
}

// The causal pattern of the stacked rows as F32, 1 where a query row may see a key: [1, rows, seq_k].
Scratch allowed_pattern(DeviceMath& math, const Geometry& g) {
  Scratch mask = math.scratch(H2_DTYPE_BOOL, {g.seq_q, g.seq_k});
  causal_mask(math, mask->tensor);
  H2_Tensor broadcast = reshaped(mask->tensor, {1, 1, g.seq_q, g.seq_k});
  broadcast.shape[1] = g.group;
  broadcast.strides[1] = 0;
  Scratch allowed = math.scratch(H2_DTYPE_F32, {1, g.rows(), g.seq_k});
  const H2_Tensor four_d = reshaped(allowed->tensor, {1, g.group, g.seq_q, g.seq_k});
  math.copy(four_d, broadcast);
  math.scale(allowed->tensor, allowed->tensor, -1.0);
  math.shift(allowed->tensor, allowed->tensor, 1.0);
  return allowed;
}

// The rows with every key masked (the first seq_q - seq_k query positions of a causal attention with
// more queries than keys), as a BOOL [slices, rows, 1] broadcast view; nullptr when there are none.
// Only they get o = 0 and lse = -inf: a row whose scores are all -inf for other reasons (an infinite
// input) is NaN, as IEEE arithmetic makes it.
struct MaskedRows {
  Scratch mask;
  H2_Tensor view{};
};
MaskedRows fully_masked_rows(DeviceMath& math, const Geometry& g, const Scratch& allowed) {
  MaskedRows rows;
  if (!allowed || g.seq_q <= g.seq_k) return rows;
  Scratch seen = math.scratch(H2_DTYPE_F32, {1, g.rows(), 1});
  math.reduce(DeviceMath::Reduce::sum, seen->tensor, allowed->tensor, {2}, true);
  rows.mask = math.scratch(H2_DTYPE_BOOL, {1, g.rows(), 1});
  math.equal(rows.mask->tensor, seen->tensor, 0.0);
  rows.view = rows.mask->tensor;
  rows.view.shape[0] = g.slices();
  rows.view.strides[0] = 0;
  return rows;
}

// c = a @ b for a batched product whose a is 0 wherever `allowed` (0/1, batch 1, a's matrix shape)
// is 0, and where those zeros must not meet b: a matmul multiplies every entry, so a masked 0 times an
// infinite or NaN element of b would make c NaN where attention, which skips masked keys, has a
// value. c = a @ (b with its non-finite elements 0), and IEEE's special values are put back from
// products of 0/1 indicators, which are finite: an allowed entry meeting a NaN of b, or an allowed 0
// meeting an infinity, or infinities of both signs, give NaN; otherwise an infinity gives its sign.
void guarded_product(DeviceMath& math, const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b,
                     const H2_Tensor& allowed) {
  const std::vector<int64_t> a_shape = shape_of(a), b_shape = shape_of(b), c_shape = shape_of(c);
  Scratch non_finite = indicator(math, b, std::nan(""));
  Scratch positive = indicator(math, b, kInfinity), negative = indicator(math, b, -kInfinity);
  Scratch finite_b = math.scratch(H2_DTYPE_F32, b_shape), zero = math.scratch(H2_DTYPE_F32, {1});
  Scratch non_finite_mask = math.scratch(H2_DTYPE_BOOL, b_shape);
  math.fill(zero->tensor, 0.0);
  math.greater(non_finite_mask->tensor, non_finite->tensor, 0.5);
  H2_Tensor zero_scalar = zero->tensor;
  zero_scalar.rank = 0;
  math.where(finite_b->tensor, non_finite_mask->tensor, zero_scalar, b);
  math.bmm(c, a, finite_b->tensor, 1.0);
  // b's NaNs: non-finite minus infinite.
  math.add(non_finite->tensor, non_finite->tensor, positive->tensor, -1.0);
  math.add(non_finite->tensor, non_finite->tensor, negative->tensor, -1.0);
  // a's signs where allowed.
  Scratch a_positive = math.scratch(H2_DTYPE_F32, a_shape), a_negative = math.scratch(H2_DTYPE_F32, a_shape);
  Scratch a_zero = indicator(math, a, 0.0);
  {
    Scratch flag = math.scratch(H2_DTYPE_BOOL, a_shape), negated = math.scratch(H2_DTYPE_F32, a_shape);
    math.greater(flag->tensor, a, 0.0);
    math.copy(a_positive->tensor, flag->tensor);
    math.scale(negated->tensor, a, -1.0);
    math.greater(flag->tensor, negated->tensor, 0.0);
    math.copy(a_negative->tensor, flag->tensor);
  }
  for (const Scratch* sign : {&a_positive, &a_negative, &a_zero})
    math.binary(H2_BINARY_MUL, (*sign)->tensor, (*sign)->tensor, allowed);
  Scratch nan_hits = math.scratch(H2_DTYPE_F32, c_shape), up = math.scratch(H2_DTYPE_F32, c_shape);
  Scratch down = math.scratch(H2_DTYPE_F32, c_shape), term = math.scratch(H2_DTYPE_F32, c_shape);
  math.bmm(nan_hits->tensor, allowed, non_finite->tensor, 1.0);
  math.bmm(up->tensor, a_positive->tensor, positive->tensor, 1.0);
  math.bmm(term->tensor, a_negative->tensor, negative->tensor, 1.0);
  math.add(up->tensor, up->tensor, term->tensor, 1.0);
  math.bmm(down->tensor, a_positive->tensor, negative->tensor, 1.0);
  math.bmm(term->tensor, a_negative->tensor, positive->tensor, 1.0);
  math.add(down->tensor, down->tensor, term->tensor, 1.0);
  math.add(positive->tensor, positive->tensor, negative->tensor, 1.0);  // any infinity
  math.bmm(term->tensor, a_zero->tensor, positive->tensor, 1.0);
  math.add(nan_hits->tensor, nan_hits->tensor, term->tensor, 1.0);
  math.binary(H2_BINARY_MINIMUM, term->tensor, up->tensor, down->tensor);  // infinities of both signs
  math.add(nan_hits->tensor, nan_hits->tensor, term->tensor, 1.0);
  Scratch hit = math.scratch(H2_DTYPE_BOOL, c_shape);
  math.greater(hit->tensor, up->tensor, 0.5);
  math.masked_fill(c, hit->tensor, kInfinity);
  math.greater(hit->tensor, down->tensor, 0.5);
  math.masked_fill(c, hit->tensor, -kInfinity);
  math.greater(hit->tensor, nan_hits->tensor, 0.5);
  math.masked_fill(c, hit->tensor, std::nan(""));
}

// c = a @ b, guarded when `allowed` is given (a causal product).
void masked_product(DeviceMath& math, const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b,
                    const Scratch& allowed, bool transpose_pattern) {
  if (!allowed) return math.bmm(c, a, b, 1.0);
  guarded_product(math, c, a, b, transpose_pattern ? transposed(allowed->tensor) : allowed->tensor);
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
  const Scratch allowed = args.causal ? allowed_pattern(math, g) : nullptr;
  const MaskedRows masked_rows = fully_masked_rows(math, g, allowed);
  math.reduce(DeviceMath::Reduce::max, top->tensor, scores->tensor, {2}, true);
  if (masked_rows.mask) math.masked_fill(top->tensor, masked_rows.view, 0.0);  // then exp(-inf - 0) = 0
  math.add(scores->tensor, scores->tensor, top->tensor, -1.0);
  math.unary(DeviceMath::Unary::exp, scores->tensor, scores->tensor);
  math.reduce(DeviceMath::Reduce::sum, total->tensor, scores->tensor, {2}, true);
  math.unary(DeviceMath::Unary::log, lse->tensor, total->tensor);  // log(0) = -inf for a masked row
  math.add(lse->tensor, lse->tensor, top->tensor, 1.0);
  math.copy(lse_view(args.lse, g.kv_heads), reshaped(lse->tensor, {g.batch, g.kv_heads, g.group, g.seq_q}));
  if (masked_rows.mask) math.masked_fill(total->tensor, masked_rows.view, 1.0);  // its probabilities 0 / 1
  math.binary(H2_BINARY_DIV, scores->tensor, scores->tensor, total->tensor);
  Scratch out = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  masked_product(math, out->tensor, scores->tensor, v->tensor, allowed, false);
  unstack_queries(math, g, args.o, out);
}

void attention_backward(DeviceMath& math, const H2_AttentionBackwardArgs& args) {
  const Geometry g(args.q, args.k);
  const Scratch q = stacked_queries(math, g, args.q), k = stacked_keys(math, g, args.k);
  const Scratch v = stacked_keys(math, g, args.v), o = stacked_queries(math, g, args.o);
  const Scratch dout = stacked_queries(math, g, args.dout);
  // p = exp(scores - lse), recomputed; a fully masked row (lse = -inf) has p = exp(-inf - inf) = 0.
  const Scratch p = masked_scores(math, g, q, k, args.scale, args.causal != 0);
  const Scratch allowed = args.causal ? allowed_pattern(math, g) : nullptr;
  Scratch lse = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), 1});
  math.copy(reshaped(lse->tensor, {g.batch, g.kv_heads, g.group, g.seq_q}), lse_view(args.lse, g.kv_heads));
  const MaskedRows masked_rows = fully_masked_rows(math, g, allowed);
  if (masked_rows.mask) math.masked_fill(lse->tensor, masked_rows.view, kInfinity);
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
  if (allowed) {  // masked entries are 0 whatever dout v^T held there
    Scratch masked = math.scratch(H2_DTYPE_BOOL, shape_of(allowed->tensor));
    math.equal(masked->tensor, allowed->tensor, 0.0);
    H2_Tensor broadcast = masked->tensor;
    broadcast.shape[0] = g.slices();
    broadcast.strides[0] = 0;
    math.masked_fill(ds->tensor, broadcast, 0.0);
  }
  // dq = ds k; dk = ds^T q and dv = p^T dout, summed over the group by the stacked rows.
  Scratch dq = math.scratch(H2_DTYPE_F32, {g.slices(), g.rows(), g.dim});
  Scratch dk = math.scratch(H2_DTYPE_F32, {g.slices(), g.seq_k, g.dim});
  Scratch dv = math.scratch(H2_DTYPE_F32, {g.slices(), g.seq_k, g.dim});
  masked_product(math, dq->tensor, ds->tensor, k->tensor, allowed, false);
  masked_product(math, dk->tensor, transposed(ds->tensor), q->tensor, allowed, true);
  masked_product(math, dv->tensor, transposed(p->tensor), dout->tensor, allowed, true);
  unstack_queries(math, g, args.dq, dq);
  math.copy(args.dk, reshaped(dk->tensor, {g.batch, g.kv_heads, g.seq_k, g.dim}));
  math.copy(args.dv, reshaped(dv->tensor, {g.batch, g.kv_heads, g.seq_k, g.dim}));
}

}  // namespace h2::plugin::composed
