// attention and attention_backward on aclnnFlashAttentionScore and aclnnFlashAttentionScoreGrad:
// the ABI's [batch, heads, seq, dim] tensors are the BNSD layout (with any strides), grouped-query
// heads are FlashAttention's GQA, and the causal mask is a BOOL [seq_q, seq_k] atten_mask (1 =
// masked) in sparse mode 0, built on the device. FlashAttention keeps the row maximum and the sum of
// exp(score - maximum) where the ABI keeps their combination, the log-sum-exp:
// lse = max + log(sum), and for the backward max = lse, sum = 1 give the same probabilities. A row
// with every key masked (causal with seq_q > seq_k) is computed as such (inner_precise 2): o = 0 and
// lse = -inf, as the ABI says.
#include <climits>
#include <optional>

#include "acl_math.hpp"
#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

constexpr int64_t kNoBand = INT32_MAX;  // pre_tokens and next_tokens that limit nothing

// The statistics FlashAttention keeps per row, FLOAT [batch, heads, seq_q, 8].
struct RowStatistics {
  RowStatistics(Stream& stream, const H2_Tensor& q)
      : max(stream, H2_DTYPE_F32, {q.shape[0], q.shape[1], q.shape[2], 8}),
        sum(stream, H2_DTYPE_F32, {q.shape[0], q.shape[1], q.shape[2], 8}) {}
  // One of the 8 repeats of a statistic, as [batch, heads, seq_q].
  static H2_Tensor first(const H2_Tensor& t) {
    H2_Tensor view = t;
    view.rank = 3;
    view.shape[3] = view.strides[3] = 0;
    return view;
  }
  ScratchTensor max, sum;
};

// The causal atten_mask into `mask` when causal.
void attention_mask(Stream& stream, const H2_Tensor& q, const H2_Tensor& k, bool causal,
                    std::optional<ScratchTensor>& mask) {
  if (!causal) return;
  mask.emplace(stream, H2_DTYPE_BOOL, std::vector<int64_t>{q.shape[2], k.shape[2]});
  write_causal_mask(stream, mask->tensor);
}

int64_t inner_precise(const H2_Tensor& q, const H2_Tensor& k, bool causal) {
  return causal && q.shape[2] > k.shape[2] ? 2 : 0;  // rows with every key masked exist
}

}  // namespace

H2_Status op_attention(H2_Stream* handle, const H2_AttentionArgs* args) {
  return guarded("attention", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const bool causal = args->causal != 0;
    std::optional<ScratchTensor> mask;
    attention_mask(*stream, args->q, args->k, causal, mask);
    RowStatistics stats(*stream, args->q);
    {
      AclTensor q(args->q), k(args->k), v(args->v), o(args->o), max(stats.max.tensor), sum(stats.sum.tensor);
      AclTensor atten_mask(mask ? mask->tensor : H2_Tensor{});
      char layout[] = "BNSD";
      run_aclnn(
          *stream, "aclnnFlashAttentionScore",
          [&](uint64_t* size, aclOpExecutor** e) {
            return ops.nn.aclnnFlashAttentionScoreWorkspace(
                q.get(), k.get(), v.get(), nullptr, nullptr, nullptr, atten_mask.get(), nullptr, args->scale, 1.0,
                kNoBand, kNoBand, args->q.shape[1], layout, inner_precise(args->q, args->k, causal), 0, max.get(),
                sum.get(), nullptr, o.get(), size, e);
          },
          ops.nn.aclnnFlashAttentionScore);
    }
    ScratchTensor lse(*stream, H2_DTYPE_F32, {args->q.shape[0], args->q.shape[1], args->q.shape[2]});
    ops.unary("aclnnLog", ops.nn.aclnnLogWorkspace, ops.nn.aclnnLog, lse.tensor,
              RowStatistics::first(stats.sum.tensor));
    ops.add(lse.tensor, lse.tensor, RowStatistics::first(stats.max.tensor), 1.0);
    copy_tensor(*stream, args->lse, lse.tensor);
  });
}

H2_Status op_attention_backward(H2_Stream* handle, const H2_AttentionBackwardArgs* args) {
  return guarded("attention_backward", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const bool causal = args->causal != 0;
    std::optional<ScratchTensor> mask;
    attention_mask(*stream, args->q, args->k, causal, mask);
    RowStatistics stats(*stream, args->q);
    // lse [batch, heads, seq_q] repeated 8 times by a stride-0 dimension.
    copy_tensor(*stream, stats.max.tensor, appended_dimension(args->lse, 8, 0));
    ops.fill(stats.sum.tensor, 1.0);
    AclTensor q(args->q), k(args->k), v(args->v), o(args->o), dout(args->dout), dq(args->dq), dk(args->dk),
        dv(args->dv);
    AclTensor max(stats.max.tensor), sum(stats.sum.tensor), atten_mask(mask ? mask->tensor : H2_Tensor{});
    char layout[] = "BNSD";
    run_aclnn(
        *stream, "aclnnFlashAttentionScoreGrad",
        [&](uint64_t* size, aclOpExecutor** e) {
          return ops.nn.aclnnFlashAttentionScoreGradWorkspace(
              q.get(), k.get(), v.get(), dout.get(), nullptr, nullptr, nullptr, atten_mask.get(), max.get(), sum.get(),
              nullptr, o.get(), nullptr, args->scale, 1.0, kNoBand, kNoBand, args->q.shape[1], layout,
              inner_precise(args->q, args->k, causal), 0, dq.get(), dk.get(), dv.get(), nullptr, size, e);
        },
        ops.nn.aclnnFlashAttentionScoreGrad);
  });
}

}  // namespace h2::ascend
