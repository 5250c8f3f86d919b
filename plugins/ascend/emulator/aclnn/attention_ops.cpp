// Emulated aclnnFlashAttentionScore and its gradient, for the BNSD layout with an [Sq, Skv] mask in
// sparse mode 0 (what the emulator supports; other layouts, pse, dropout and prefixes are refused).
// As a flash-attention kernel does, a masked key is skipped, never multiplied by 0, so NaN or
// infinity in a masked key or value does not reach the output. FP32 arithmetic; the backward sums
// dk and dv in a fixed order (deterministic). A row with every key masked gives 0 (max -inf, sum 0).
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "emulated_op.hpp"
#include "tensor_access.hpp"

using namespace ascend_emulator;

namespace {

struct Attention {
  aclTensor q, k, v;
  std::optional<aclTensor> mask;
  double scale;
  int64_t batch, heads, kv_heads, seq_q, seq_k, dim;

  int64_t at(int64_t b, int64_t n, int64_t s, int64_t d, int64_t heads_, int64_t seq) const {
    return ((b * heads_ + n) * seq + s) * dim + d;
  }
};

Attention plan_attention(const char* op, const aclTensor* query, const aclTensor* key, const aclTensor* value,
                         const aclTensor* pse, const aclTensor* drop_mask, const aclTensor* padding_mask,
                         const aclTensor* atten_mask, const aclIntArray* prefix, double scale, double keep_prob,
                         int64_t head_num, const char* layout, int64_t sparse_mode) {
  check_tensor(query, "query");
  check_tensor(key, "key");
  check_tensor(value, "value");
  if (layout == nullptr || std::strcmp(layout, "BNSD") != 0)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": only inputLayout BNSD is emulated");
  if (pse || drop_mask || padding_mask || prefix || keep_prob != 1.0 || sparse_mode != 0)
    throw Error(ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": pse, dropout, padding, prefixes and sparse modes other than 0 are not emulated");
  if (query->view.size() != 4 || key->view.size() != 4 || value->view != key->view || query->dtype != key->dtype ||
      key->dtype != value->dtype || !is_float(query->dtype))
    throw Error(ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": query, key and value must be 4-D BNSD of one float dtype");
  Attention a{*query,         *key,         *value,         std::nullopt, scale,         query->view[0],
              query->view[1], key->view[1], query->view[2], key->view[2], query->view[3]};
  if (head_num != a.heads || a.kv_heads == 0 || a.heads % a.kv_heads != 0 || key->view[0] != a.batch ||
      key->view[3] != a.dim)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": headNum, batch or head size do not match");
  if (atten_mask) {
    check_tensor(atten_mask, "attenMask");
    if (atten_mask->view != std::vector<int64_t>{a.seq_q, a.seq_k} ||
        (atten_mask->dtype != ACL_BOOL && atten_mask->dtype != ACL_UINT8))
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": attenMask must be BOOL or UINT8 [Sq, Skv]");
    a.mask = *atten_mask;
  }
  return a;
}

void check_statistic(const char* op, const aclTensor* t, const Attention& a) {
  check_tensor(t, "a softmax statistic");
  if (t->dtype != ACL_FLOAT || t->view != std::vector<int64_t>{a.batch, a.heads, a.seq_q, 8})
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": softmax max and sum must be FLOAT [B, N, Sq, 8]");
}

void check_like(const char* op, const aclTensor* t, const aclTensor& like, const char* role) {
  check_tensor(t, role);
  if (t->view != like.view || t->dtype != like.dtype)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": " + role + " must have the shape and dtype of its input");
}

// The unmasked scores of row (b, n, i): scale * q . k_j in FP32, -inf where masked.
void scores(const Attention& a, const Elements& q, const Elements& k, const std::optional<Elements>& mask, int64_t b,
            int64_t n, int64_t i, std::vector<float>& s) {
  const int64_t kv = n / (a.heads / a.kv_heads);
  for (int64_t j = 0; j < a.seq_k; ++j) {
    if (mask && mask->load(i * a.seq_k + j) != 0) {
      s[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity();
      continue;
    }
    float dot = 0;
    for (int64_t d = 0; d < a.dim; ++d)
      dot += static_cast<float>(q.load(a.at(b, n, i, d, a.heads, a.seq_q))) *
             static_cast<float>(k.load(a.at(b, kv, j, d, a.kv_heads, a.seq_k)));
    s[static_cast<size_t>(j)] = static_cast<float>(a.scale) * dot;
  }
}

bool masked(const std::optional<Elements>& mask, const Attention& a, int64_t i, int64_t j) {
  return mask && mask->load(i * a.seq_k + j) != 0;
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnFlashAttentionScoreGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key, const aclTensor* value, const aclTensor* real_shift_optional,
    const aclTensor* drop_mask_optional, const aclTensor* padding_mask_optional, const aclTensor* atten_mask_optional,
    const aclIntArray* prefix_optional, double scale_value, double keep_prob, int64_t /*pre_tokens*/,
    int64_t /*next_tokens*/, int64_t head_num, char* input_layout, int64_t /*inner_precise*/, int64_t sparse_mode,
    const aclTensor* softmax_max_out, const aclTensor* softmax_sum_out, const aclTensor* /*softmax_out_out*/,
    const aclTensor* attention_out_out, uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnFlashAttentionScore", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    const Attention a = plan_attention("aclnnFlashAttentionScore", query, key, value, real_shift_optional,
                                       drop_mask_optional, padding_mask_optional, atten_mask_optional, prefix_optional,
                                       scale_value, keep_prob, head_num, input_layout, sparse_mode);
    check_statistic("aclnnFlashAttentionScore", softmax_max_out, a);
    check_statistic("aclnnFlashAttentionScore", softmax_sum_out, a);
    check_like("aclnnFlashAttentionScore", attention_out_out, *query, "attentionOut");
    return [a, max_t = *softmax_max_out, sum_t = *softmax_sum_out, out_t = *attention_out_out](void*) {
      const Elements q(a.q), k(a.k), v(a.v), maxes(max_t), sums(sum_t), out(out_t);
      std::optional<Elements> mask;
      if (a.mask) mask.emplace(*a.mask);
      std::vector<float> s(static_cast<size_t>(a.seq_k)), o(static_cast<size_t>(a.dim));
      for (int64_t b = 0; b < a.batch; ++b)
        for (int64_t n = 0; n < a.heads; ++n) {
          const int64_t kv = n / (a.heads / a.kv_heads);
          for (int64_t i = 0; i < a.seq_q; ++i) {
            scores(a, q, k, mask, b, n, i, s);
            float largest = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < a.seq_k; ++j)
              if (!masked(mask, a, i, j))
                largest = std::isnan(s[static_cast<size_t>(j)]) ? s[static_cast<size_t>(j)]
                                                                : std::max(largest, s[static_cast<size_t>(j)]);
            float total = 0;
            std::fill(o.begin(), o.end(), 0.0f);
            for (int64_t j = 0; j < a.seq_k; ++j) {
              if (masked(mask, a, i, j)) continue;
              const float p = std::exp(s[static_cast<size_t>(j)] - largest);
              total += p;
              for (int64_t d = 0; d < a.dim; ++d)
                o[static_cast<size_t>(d)] += p * static_cast<float>(v.load(a.at(b, kv, j, d, a.kv_heads, a.seq_k)));
            }
            for (int64_t d = 0; d < a.dim; ++d)
              out.store(a.at(b, n, i, d, a.heads, a.seq_q), total == 0 ? 0.0f : o[static_cast<size_t>(d)] / total);
            for (int64_t r = 0; r < 8; ++r) {
              const int64_t at = ((b * a.heads + n) * a.seq_q + i) * 8 + r;
              maxes.store(at, largest);
              sums.store(at, total);
            }
          }
        }
    };
  });
}
H2_EMULATED_RUN(aclnnFlashAttentionScore)

ASCEND_EMULATOR_C aclnnStatus aclnnFlashAttentionScoreGradGetWorkspaceSize(
    const aclTensor* query, const aclTensor* key_in, const aclTensor* value, const aclTensor* dy,
    const aclTensor* pse_shift_optional, const aclTensor* drop_mask_optional, const aclTensor* padding_mask_optional,
    const aclTensor* atten_mask_optional, const aclTensor* softmax_max_optional, const aclTensor* softmax_sum_optional,
    const aclTensor* /*softmax_in_optional*/, const aclTensor* attention_in_optional,
    const aclIntArray* prefix_optional, double scale_value, double keep_prob, int64_t /*pre_tokens*/,
    int64_t /*next_tokens*/, int64_t head_num, char* input_layout, int64_t /*inner_precise*/, int64_t sparse_mode,
    const aclTensor* dq_out, const aclTensor* dk_out, const aclTensor* dv_out, const aclTensor* /*dpse_out*/,
    uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator(
      "aclnnFlashAttentionScoreGrad", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
        const char* op = "aclnnFlashAttentionScoreGrad";
        const Attention a = plan_attention(op, query, key_in, value, pse_shift_optional, drop_mask_optional,
                                           padding_mask_optional, atten_mask_optional, prefix_optional, scale_value,
                                           keep_prob, head_num, input_layout, sparse_mode);
        if (!softmax_max_optional || !softmax_sum_optional || !attention_in_optional)
          throw Error(ACLNN_ERR_PARAM_NULLPTR,
                      std::string(op) + ": the emulator needs softmaxMax, softmaxSum and attentionIn");
        check_statistic(op, softmax_max_optional, a);
        check_statistic(op, softmax_sum_optional, a);
        check_like(op, attention_in_optional, *query, "attentionIn");
        check_like(op, dy, *query, "dy");
        check_like(op, dq_out, *query, "dqOut");
        check_like(op, dk_out, *key_in, "dkOut");
        check_like(op, dv_out, *value, "dvOut");
        return [a, dy_t = *dy, max_t = *softmax_max_optional, sum_t = *softmax_sum_optional,
                o_t = *attention_in_optional, dq_t = *dq_out, dk_t = *dk_out, dv_t = *dv_out](void*) {
          const Elements q(a.q), k(a.k), v(a.v), grad(dy_t), maxes(max_t), sums(sum_t), out(o_t);
          const Elements dq(dq_t), dk(dk_t), dv(dv_t);
          std::optional<Elements> mask;
          if (a.mask) mask.emplace(*a.mask);
          const size_t kv_size = static_cast<size_t>(a.batch * a.kv_heads * a.seq_k * a.dim);
          std::vector<float> dk_sum(kv_size, 0.0f), dv_sum(kv_size, 0.0f);
          std::vector<float> s(static_cast<size_t>(a.seq_k)), dq_row(static_cast<size_t>(a.dim));
          for (int64_t b = 0; b < a.batch; ++b)
            for (int64_t n = 0; n < a.heads; ++n) {
              const int64_t kv = n / (a.heads / a.kv_heads);
              for (int64_t i = 0; i < a.seq_q; ++i) {
                scores(a, q, k, mask, b, n, i, s);
                const int64_t stat = ((b * a.heads + n) * a.seq_q + i) * 8;
                const auto largest = static_cast<float>(maxes.load(stat));
                const auto total = static_cast<float>(sums.load(stat));
                float row_dot = 0;  // D_i = dy_i . o_i
                for (int64_t d = 0; d < a.dim; ++d)
                  row_dot += static_cast<float>(grad.load(a.at(b, n, i, d, a.heads, a.seq_q))) *
                             static_cast<float>(out.load(a.at(b, n, i, d, a.heads, a.seq_q)));
                std::fill(dq_row.begin(), dq_row.end(), 0.0f);
                for (int64_t j = 0; j < a.seq_k; ++j) {
                  if (masked(mask, a, i, j)) continue;
                  const float p = std::exp(s[static_cast<size_t>(j)] - largest) / total;
                  float dp = 0;
                  for (int64_t d = 0; d < a.dim; ++d)
                    dp += static_cast<float>(grad.load(a.at(b, n, i, d, a.heads, a.seq_q))) *
                          static_cast<float>(v.load(a.at(b, kv, j, d, a.kv_heads, a.seq_k)));
                  const float ds = p * (dp - row_dot);
                  for (int64_t d = 0; d < a.dim; ++d) {
                    const int64_t kv_at = a.at(b, kv, j, d, a.kv_heads, a.seq_k);
                    dq_row[static_cast<size_t>(d)] += ds * static_cast<float>(k.load(kv_at));
                    dk_sum[static_cast<size_t>(kv_at)] +=
                        static_cast<float>(a.scale) * ds *
                        static_cast<float>(q.load(a.at(b, n, i, d, a.heads, a.seq_q)));
                    dv_sum[static_cast<size_t>(kv_at)] +=
                        p * static_cast<float>(grad.load(a.at(b, n, i, d, a.heads, a.seq_q)));
                  }
                }
                for (int64_t d = 0; d < a.dim; ++d)
                  dq.store(a.at(b, n, i, d, a.heads, a.seq_q),
                           static_cast<float>(a.scale) * dq_row[static_cast<size_t>(d)]);
              }
            }
          for (size_t e = 0; e < kv_size; ++e) {
            dk.store(static_cast<int64_t>(e), dk_sum[e]);
            dv.store(static_cast<int64_t>(e), dv_sum[e]);
          }
        };
      });
}
H2_EMULATED_RUN(aclnnFlashAttentionScoreGrad)
