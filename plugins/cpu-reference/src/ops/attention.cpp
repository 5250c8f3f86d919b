// Causal, grouped-query attention and its backward, computed exactly (the full score row) in fp64.
#include <cmath>
#include <limits>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

// q, k, v, o and their gradients as dense fp64 arrays [batch, heads, seq, dim].
struct Dims {
  int64_t batch, heads, kv_heads, seq_q, seq_k, dim;
  explicit Dims(const TensorRef& q, const TensorRef& k)
      : batch(q.shape[0]),
        heads(q.shape[1]),
        kv_heads(k.shape[1]),
        seq_q(q.shape[2]),
        seq_k(k.shape[2]),
        dim(q.shape[3]) {}
  int64_t group() const { return heads / kv_heads; }
  // Keys [0, visible) that query i sees.
  int64_t visible(int64_t i, bool causal) const {
    return causal ? std::clamp<int64_t>(i + 1 + seq_k - seq_q, 0, seq_k) : seq_k;
  }
  size_t q_at(int64_t b, int64_t h, int64_t i) const {
    return static_cast<size_t>(((b * heads + h) * seq_q + i) * dim);
  }
  size_t k_at(int64_t b, int64_t h, int64_t j) const {
    return static_cast<size_t>(((b * kv_heads + h) * seq_k + j) * dim);
  }
  size_t row_at(int64_t b, int64_t h, int64_t i) const { return static_cast<size_t>((b * heads + h) * seq_q + i); }
};

double dot(const double* a, const double* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void attention_kernel(ThreadPool& pool, const TensorRef& q_t, const TensorRef& k_t, const TensorRef& v_t,
                      const TensorRef& o_t, const TensorRef& lse_t, double scale, bool causal) {
  const Dims d(q_t, k_t);
  const Values q = load(q_t), k = load(k_t), v = load(v_t);
  Values o(q.size(), 0.0), lse(static_cast<size_t>(d.batch * d.heads * d.seq_q));
  pool.parallel_for(d.batch * d.heads, 1, [&](int64_t begin, int64_t end) {
    Values p(static_cast<size_t>(d.seq_k));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.heads, h = bh % d.heads, kvh = h / d.group();
      for (int64_t i = 0; i < d.seq_q; ++i) {
        const int64_t visible = d.visible(i, causal);
        if (visible == 0) {
          lse[d.row_at(b, h, i)] = -std::numeric_limits<double>::infinity();
          continue;
        }
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          p[static_cast<size_t>(j)] = scale * dot(&q[d.q_at(b, h, i)], &k[d.k_at(b, kvh, j)], d.dim);
          max = std::max(max, p[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - max);
          sum += p[static_cast<size_t>(j)];
        }
        double* out = &o[d.q_at(b, h, i)];
        for (int64_t j = 0; j < visible; ++j) {
          const double* vj = &v[d.k_at(b, kvh, j)];
          for (int64_t c = 0; c < d.dim; ++c) out[c] += p[static_cast<size_t>(j)] / sum * vj[c];
        }
        lse[d.row_at(b, h, i)] = max + std::log(sum);
      }
    }
  });
  store(o_t, o);
  store(lse_t, lse);
}

void attention_backward_kernel(ThreadPool& pool, const TensorRef& q_t, const TensorRef& k_t, const TensorRef& v_t,
                               const TensorRef& o_t, const TensorRef& lse_t, const TensorRef& do_t,
                               const TensorRef& dq_t, const TensorRef& dk_t, const TensorRef& dv_t, double scale,
                               bool causal) {
  const Dims d(q_t, k_t);
  const Values q = load(q_t), k = load(k_t), v = load(v_t), o = load(o_t), lse = load(lse_t);
  const Values dout = load(do_t);
  Values dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  // One task per (batch, kv head): it owns that head's dk and dv and the dq of its query heads, and
  // visits query heads and positions in order, so sums are fixed whatever the thread count.
  pool.parallel_for(d.batch * d.kv_heads, 1, [&](int64_t begin, int64_t end) {
    Values ds(static_cast<size_t>(d.seq_k));
    for (int64_t bk = begin; bk < end; ++bk) {
      const int64_t b = bk / d.kv_heads, kvh = bk % d.kv_heads;
      for (int64_t h = kvh * d.group(); h < (kvh + 1) * d.group(); ++h) {
        for (int64_t i = 0; i < d.seq_q; ++i) {
          const int64_t visible = d.visible(i, causal);
          const double* qi = &q[d.q_at(b, h, i)];
          const double* gi = &dout[d.q_at(b, h, i)];
          const double row_lse = lse[d.row_at(b, h, i)];
          const double delta = dot(gi, &o[d.q_at(b, h, i)], d.dim);  // sum_j p_j dp_j
          for (int64_t j = 0; j < visible; ++j) {
            const double p = std::exp(scale * dot(qi, &k[d.k_at(b, kvh, j)], d.dim) - row_lse);
            const double dp = dot(gi, &v[d.k_at(b, kvh, j)], d.dim);
            ds[static_cast<size_t>(j)] = p * (dp - delta);
            double* dvj = &dv[d.k_at(b, kvh, j)];
            for (int64_t c = 0; c < d.dim; ++c) dvj[c] += p * gi[c];
          }
          double* dqi = &dq[d.q_at(b, h, i)];
          for (int64_t j = 0; j < visible; ++j) {
            const double* kj = &k[d.k_at(b, kvh, j)];
            double* dkj = &dk[d.k_at(b, kvh, j)];
            const double s = scale * ds[static_cast<size_t>(j)];
            for (int64_t c = 0; c < d.dim; ++c) {
              dqi[c] += s * kj[c];
              dkj[c] += s * qi[c];
            }
          }
        }
      }
    }
  });
  store(dq_t, dq);
  store(dk_t, dk);
  store(dv_t, dv);
}

}  // namespace

H2_Status op_attention(H2_Stream* stream, const H2_AttentionArgs* args) {
  return run_op("attention", stream, args, [&](OpCall& call) {
    TensorRef q = call.tensor(args->q, "q"), k = call.tensor(args->k, "k"), v = call.tensor(args->v, "v");
    TensorRef o = call.tensor(args->o, "o"), lse = call.tensor(args->lse, "lse");
    const double scale = args->scale;
    const bool causal = args->causal != 0;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { attention_kernel(pool, q, k, v, o, lse, scale, causal); });
  });
}

H2_Status op_attention_backward(H2_Stream* stream, const H2_AttentionBackwardArgs* args) {
  return run_op("attention_backward", stream, args, [&](OpCall& call) {
    TensorRef q = call.tensor(args->q, "q"), k = call.tensor(args->k, "k"), v = call.tensor(args->v, "v");
    TensorRef o = call.tensor(args->o, "o"), lse = call.tensor(args->lse, "lse");
    TensorRef dout = call.tensor(args->dout, "dout"), dq = call.tensor(args->dq, "dq");
    TensorRef dk = call.tensor(args->dk, "dk"), dv = call.tensor(args->dv, "dv");
    const double scale = args->scale;
    const bool causal = args->causal != 0;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { attention_backward_kernel(pool, q, k, v, o, lse, dout, dq, dk, dv, scale, causal); });
  });
}

}  // namespace h2::cpu_reference
