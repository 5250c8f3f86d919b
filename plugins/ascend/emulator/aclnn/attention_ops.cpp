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

// One head's q (or dy, o) and its kv head's k and v as FP32 rows, loaded once per head.
struct Head {
  std::vector<float> q, k, v;
};

void load_head(const Attention& a, const Elements& q, const Elements& k, const Elements& v, int64_t b, int64_t n,
               Head& h) {
  const int64_t kv = n / (a.heads / a.kv_heads);
  h.q.resize(static_cast<size_t>(a.seq_q * a.dim));
  h.k.resize(static_cast<size_t>(a.seq_k * a.dim));
  h.v.resize(static_cast<size_t>(a.seq_k * a.dim));
  q.load_range(a.at(b, n, 0, 0, a.heads, a.seq_q), a.seq_q * a.dim, h.q.data());
  k.load_range(a.at(b, kv, 0, 0, a.kv_heads, a.seq_k), a.seq_k * a.dim, h.k.data());
  v.load_range(a.at(b, kv, 0, 0, a.kv_heads, a.seq_k), a.seq_k * a.dim, h.v.data());
}

// The mask as 0/1 per (i, j), or empty when there is none.
std::vector<float> load_mask(const Attention& a) {
  std::vector<float> mask;
  if (!a.mask) return mask;
  mask.resize(static_cast<size_t>(a.seq_q * a.seq_k));
  Elements(*a.mask).load_range(0, a.seq_q * a.seq_k, mask.data());
  return mask;
}

bool masked(const std::vector<float>& mask, const Attention& a, int64_t i, int64_t j) {
  return !mask.empty() && mask[static_cast<size_t>(i * a.seq_k + j)] != 0;
}

// Row i's scores scale * q_i . k_j in FP32 (masked entries left as they are: callers skip them).
void scores(const Attention& a, const Head& h, const std::vector<float>& mask, int64_t i, std::vector<float>& s) {
  const float* qi = h.q.data() + i * a.dim;
  for (int64_t j = 0; j < a.seq_k; ++j) {
    if (masked(mask, a, i, j)) continue;
    const float* kj = h.k.data() + j * a.dim;
    float dot = 0;
    for (int64_t d = 0; d < a.dim; ++d) dot += qi[d] * kj[d];
    s[static_cast<size_t>(j)] = static_cast<float>(a.scale) * dot;
  }
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
      const std::vector<float> mask = load_mask(a);
      Head h;
      std::vector<float> s(static_cast<size_t>(a.seq_k)), o(static_cast<size_t>(a.dim));
      for (int64_t b = 0; b < a.batch; ++b)
        for (int64_t n = 0; n < a.heads; ++n) {
          load_head(a, q, k, v, b, n, h);
          for (int64_t i = 0; i < a.seq_q; ++i) {
            scores(a, h, mask, i, s);
            float largest = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < a.seq_k; ++j) {
              if (masked(mask, a, i, j)) continue;
              const float x = s[static_cast<size_t>(j)];
              largest = std::isnan(x) ? x : std::max(largest, x);
            }
            float total = 0;
            std::fill(o.begin(), o.end(), 0.0f);
            for (int64_t j = 0; j < a.seq_k; ++j) {
              if (masked(mask, a, i, j)) continue;
              const float p = std::exp(s[static_cast<size_t>(j)] - largest);
              total += p;
              const float* vj = h.v.data() + j * a.dim;
              for (int64_t d = 0; d < a.dim; ++d) o[static_cast<size_t>(d)] += p * vj[d];
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
          const std::vector<float> mask = load_mask(a);
          const size_t kv_size = static_cast<size_t>(a.batch * a.kv_heads * a.seq_k * a.dim);
          std::vector<float> dk_sum(kv_size, 0.0f), dv_sum(kv_size, 0.0f);
          std::vector<float> s(static_cast<size_t>(a.seq_k)), dq_row(static_cast<size_t>(a.dim));
          std::vector<float> dy_head(static_cast<size_t>(a.seq_q * a.dim)), o_head(dy_head.size());
          Head h;
          for (int64_t b = 0; b < a.batch; ++b)
            for (int64_t n = 0; n < a.heads; ++n) {
              const int64_t kv = n / (a.heads / a.kv_heads);
              load_head(a, q, k, v, b, n, h);
              grad.load_range(a.at(b, n, 0, 0, a.heads, a.seq_q), a.seq_q * a.dim, dy_head.data());
              out.load_range(a.at(b, n, 0, 0, a.heads, a.seq_q), a.seq_q * a.dim, o_head.data());
              float* dk_head = dk_sum.data() + a.at(b, kv, 0, 0, a.kv_heads, a.seq_k);
              float* dv_head = dv_sum.data() + a.at(b, kv, 0, 0, a.kv_heads, a.seq_k);
              for (int64_t i = 0; i < a.seq_q; ++i) {
                scores(a, h, mask, i, s);
                const int64_t stat = ((b * a.heads + n) * a.seq_q + i) * 8;
                const auto largest = static_cast<float>(maxes.load(stat));
                const auto total = static_cast<float>(sums.load(stat));
                const float* dyi = dy_head.data() + i * a.dim;
                const float* oi = o_head.data() + i * a.dim;
                const float* qi = h.q.data() + i * a.dim;
                float row_dot = 0;  // D_i = dy_i . o_i
                for (int64_t d = 0; d < a.dim; ++d) row_dot += dyi[d] * oi[d];
                std::fill(dq_row.begin(), dq_row.end(), 0.0f);
                for (int64_t j = 0; j < a.seq_k; ++j) {
                  if (masked(mask, a, i, j)) continue;
                  const float p = std::exp(s[static_cast<size_t>(j)] - largest) / total;
                  const float* vj = h.v.data() + j * a.dim;
                  const float* kj = h.k.data() + j * a.dim;
                  float dp = 0;
                  for (int64_t d = 0; d < a.dim; ++d) dp += dyi[d] * vj[d];
                  const float ds = p * (dp - row_dot);
                  const float scaled_ds = static_cast<float>(a.scale) * ds;
                  for (int64_t d = 0; d < a.dim; ++d) {
                    dq_row[static_cast<size_t>(d)] += ds * kj[d];
                    dk_head[j * a.dim + d] += scaled_ds * qi[d];
                    dv_head[j * a.dim + d] += p * dyi[d];
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
