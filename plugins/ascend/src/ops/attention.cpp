// attention and its backward composed from aclnn operators in FP32 (a first mapping: aclnn's
// FlashAttentionScore, with its layouts and sparse modes, is the next step; see the issue notes).
// q, k and v are copied into contiguous FP32 [batch * heads, seq, dim] scratch, k and v repeated over
// the query heads that share them (grouped-query attention) by a stride-0 view; the scores are a
// batched product (aclnnBaddbmm with beta 0), the causal mask a BOOL [seq_q, seq_k] mask filled with
// -inf, and the softmax is written out so that its log-sum-exp is kept for the backward. A row with
// every key masked gives o = 0 and lse = -inf, as the ABI says.
#include <limits>
#include <optional>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

struct Dims {
  int64_t batch, heads, kv_heads, group, seq_q, seq_k, dim;
};

Dims dims_of(const H2_Tensor& q, const H2_Tensor& k) {
  Dims d{q.shape[0], q.shape[1], k.shape[1], q.shape[1] / k.shape[1], q.shape[2], k.shape[2], q.shape[3]};
  return d;
}

// k or v [batch, kv_heads, seq, dim] as [batch, kv_heads, group, seq, dim]: each kv head seen group
// times (stride 0), which is [batch, heads, seq, dim] once made contiguous.
H2_Tensor repeated_over_group(const H2_Tensor& t, int64_t group) {
  H2_Tensor view = t;
  view.rank = 5;
  for (int d = 4; d >= 3; --d) {
    view.shape[d] = t.shape[d - 1];
    view.strides[d] = t.strides[d - 1];
  }
  view.shape[2] = group;
  view.strides[2] = 0;
  return view;
}

// The FP32 scratch of one attention call: inputs made contiguous, scores and probabilities.
struct Workspace {
  Workspace(Stream& stream, const Dims& d)
      : q(stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_q, d.dim}),
        k(stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_k, d.dim}),
        v(stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_k, d.dim}),
        probabilities(stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_q, d.seq_k}),
        row(stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_q, 1}) {}
  ScratchTensor q, k, v, probabilities, row;
  std::optional<ScratchTensor> mask;
};

void load_inputs(Stream& stream, Workspace& w, const Dims& d, const H2_Tensor& q, const H2_Tensor& k,
                 const H2_Tensor& v) {
  copy_tensor(stream, reshaped(w.q.tensor, {d.batch, d.heads, d.seq_q, d.dim}), q);
  copy_tensor(stream, reshaped(w.k.tensor, {d.batch, d.kv_heads, d.group, d.seq_k, d.dim}), repeated_over_group(k, d.group));
  copy_tensor(stream, reshaped(w.v.tensor, {d.batch, d.kv_heads, d.group, d.seq_k, d.dim}), repeated_over_group(v, d.group));
}

// probabilities = scale * q k^T with masked scores at -inf.
void masked_scores(TensorOps& ops, Workspace& w, const Dims& d, double scale, bool causal) {
  ops.bmm(w.probabilities.tensor, w.q.tensor, transposed(w.k.tensor), scale);
  if (!causal) return;
  w.mask.emplace(ops.stream, H2_DTYPE_BOOL, std::vector<int64_t>{d.seq_q, d.seq_k});
  write_causal_mask(ops.stream, w.mask->tensor);
  ops.masked_fill(w.probabilities.tensor, w.mask->tensor, -std::numeric_limits<double>::infinity());
}

}  // namespace

H2_Status op_attention(H2_Stream* handle, const H2_AttentionArgs* args) {
  return guarded("attention", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const Dims d = dims_of(args->q, args->k);
    Workspace w(*stream, d);
    ScratchTensor total(*stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_q, 1});
    ScratchTensor out(*stream, H2_DTYPE_F32, {d.batch * d.heads, d.seq_q, d.dim});
    load_inputs(*stream, w, d, args->q, args->k, args->v);
    const bool causal = args->causal != 0;
    masked_scores(ops, w, d, args->scale, causal);
    // The row maximum, with 0 for fully masked rows (their scores are all -inf), keeps exp finite.
    ops.amax(w.row.tensor, w.probabilities.tensor, {2}, true);
    if (causal) {
      H2_Tensor first_column = w.mask->tensor;  // row i is fully masked iff its key 0 is
      first_column.shape[1] = 1;
      ops.masked_fill(w.row.tensor, first_column, 0.0);
    }
    ops.add(w.probabilities.tensor, w.probabilities.tensor, w.row.tensor, 1.0, true);
    ops.unary("aclnnExp", ops.nn.aclnnExpWorkspace, ops.nn.aclnnExp, w.probabilities.tensor, w.probabilities.tensor);
    ops.sum(total.tensor, w.probabilities.tensor, {2}, true);
    ops.binary("aclnnDiv", ops.nn.aclnnDivWorkspace, ops.nn.aclnnDiv, w.probabilities.tensor, w.probabilities.tensor,
               total.tensor);
    if (causal) ops.masked_fill(w.probabilities.tensor, w.mask->tensor, 0.0);  // 0 / 0 in fully masked rows
    // lse = log(sum) + max: -inf for a fully masked row (log 0 + 0).
    ops.unary("aclnnLog", ops.nn.aclnnLogWorkspace, ops.nn.aclnnLog, total.tensor, total.tensor);
    ops.add(total.tensor, total.tensor, w.row.tensor, 1.0);
    ops.bmm(out.tensor, w.probabilities.tensor, w.v.tensor, 1.0);
    copy_tensor(*stream, args->o, reshaped(out.tensor, {d.batch, d.heads, d.seq_q, d.dim}));
    copy_tensor(*stream, args->lse, reshaped(total.tensor, {d.batch, d.heads, d.seq_q}));
  });
}

// From P = exp(S - lse): dv = P^T dO, dP = dO v^T, dS = P (dP - rowsum(dO o)), dq = scale dS k,
// dk = scale dS^T q; dk and dv then summed over the query heads of each kv head.
H2_Status op_attention_backward(H2_Stream* handle, const H2_AttentionBackwardArgs* args) {
  return guarded("attention_backward", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const Dims d = dims_of(args->q, args->k);
    const int64_t bh = d.batch * d.heads;
    Workspace w(*stream, d);
    ScratchTensor dout(*stream, H2_DTYPE_F32, {bh, d.seq_q, d.dim}), out(*stream, H2_DTYPE_F32, {bh, d.seq_q, d.dim});
    ScratchTensor dp(*stream, H2_DTYPE_F32, {bh, d.seq_q, d.seq_k});
    ScratchTensor dq(*stream, H2_DTYPE_F32, {bh, d.seq_q, d.dim});
    ScratchTensor dk(*stream, H2_DTYPE_F32, {bh, d.seq_k, d.dim}), dv(*stream, H2_DTYPE_F32, {bh, d.seq_k, d.dim});
    load_inputs(*stream, w, d, args->q, args->k, args->v);
    copy_tensor(*stream, reshaped(dout.tensor, {d.batch, d.heads, d.seq_q, d.dim}), args->dout);
    copy_tensor(*stream, reshaped(out.tensor, {d.batch, d.heads, d.seq_q, d.dim}), args->o);
    copy_tensor(*stream, reshaped(w.row.tensor, {d.batch, d.heads, d.seq_q}), args->lse);
    const bool causal = args->causal != 0;
    masked_scores(ops, w, d, args->scale, causal);
    ops.add(w.probabilities.tensor, w.probabilities.tensor, w.row.tensor, 1.0, true);
    ops.unary("aclnnExp", ops.nn.aclnnExpWorkspace, ops.nn.aclnnExp, w.probabilities.tensor, w.probabilities.tensor);
    if (causal) ops.masked_fill(w.probabilities.tensor, w.mask->tensor, 0.0);  // -inf - (-inf) in fully masked rows
    ops.bmm(dv.tensor, transposed(w.probabilities.tensor), dout.tensor, 1.0);
    ops.bmm(dp.tensor, dout.tensor, transposed(w.v.tensor), 1.0);
    ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, out.tensor, out.tensor, dout.tensor);
    ops.sum(w.row.tensor, out.tensor, {2}, true);
    ops.add(dp.tensor, dp.tensor, w.row.tensor, 1.0, true);
    ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, dp.tensor, dp.tensor, w.probabilities.tensor);
    ops.bmm(dq.tensor, dp.tensor, w.k.tensor, args->scale);
    ops.bmm(dk.tensor, transposed(dp.tensor), w.q.tensor, args->scale);
    copy_tensor(*stream, args->dq, reshaped(dq.tensor, {d.batch, d.heads, d.seq_q, d.dim}));
    ops.sum(args->dk, reshaped(dk.tensor, {d.batch, d.kv_heads, d.group, d.seq_k, d.dim}), {2}, false);
    ops.sum(args->dv, reshaped(dv.tensor, {d.batch, d.kv_heads, d.group, d.seq_k, d.dim}), {2}, false);
  });
}

}  // namespace h2::ascend
