// The operators, for framework code: each validates its arguments (errors name the operator and the
// argument), then enqueues on `stream` through the stream's plugin and returns without waiting.
// Outputs are passed in, allocated by the caller (Tensor::empty), so memory stays in the caller's
// hands; every output is overwritten unless its description says otherwise. The semantics are
// those of plugin_abi.h, section 8.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "h2/tensor.hpp"

namespace h2 {
class Stream;
}

namespace h2::ops {

// ---- Linear algebra ----

struct GemmOptions {
  bool transpose_a = false;
  bool transpose_b = false;
  double alpha = 1;
  double beta = 0;  // 0: C is only written
};
// C = alpha * op(A) @ op(B) + beta * C + bias. A [m, k], B [k, n], C [m, n], or batched with a
// leading batch dimension (A or B may have batch 1, or no batch dimension, to share one matrix).
void gemm(Stream& stream, const Tensor& a, const Tensor& b, const Tensor& c, const GemmOptions& options = {},
          const Tensor& bias = {});

// ---- Normalisation ----

void softmax(Stream& stream, const Tensor& x, const Tensor& y, double scale = 1, bool causal = false);
void softmax_backward(Stream& stream, const Tensor& y, const Tensor& dy, const Tensor& dx, double scale = 1);
// mean and rstd: f32 of x's shape without its last dimension. weight and bias may be undefined.
void layer_norm(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                const Tensor& mean, const Tensor& rstd, double eps = 1e-5);
void layer_norm_backward(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias);
void rms_norm(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd,
              double eps = 1e-6);
void rms_norm_backward(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                       const Tensor& dx, const Tensor& dweight);

// ---- Activations ----

enum class GeluApproximation { none, tanh };
void gelu(Stream& stream, const Tensor& x, const Tensor& y, GeluApproximation approximation = GeluApproximation::none);
void gelu_backward(Stream& stream, const Tensor& x, const Tensor& dy, const Tensor& dx,
                   GeluApproximation approximation = GeluApproximation::none);
void silu(Stream& stream, const Tensor& x, const Tensor& y);
void silu_backward(Stream& stream, const Tensor& x, const Tensor& dy, const Tensor& dx);
void swiglu(Stream& stream, const Tensor& gate, const Tensor& up, const Tensor& y);
void swiglu_backward(Stream& stream, const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                     const Tensor& dup);

// ---- Embeddings ----

void embedding(Stream& stream, const Tensor& weight, const Tensor& indices, const Tensor& y);
void embedding_backward(Stream& stream, const Tensor& indices, const Tensor& dy, const Tensor& dweight);

struct RotaryOptions {
  double base = 10000;
  int64_t position_offset = 0;
  bool interleaved = false;  // pairs (2i, 2i + 1) instead of (i, i + head_dim / 2)
};
// x [..., seq, heads, head_dim].
void rotary(Stream& stream, const Tensor& x, const Tensor& y, const RotaryOptions& options = {});
void rotary_backward(Stream& stream, const Tensor& dy, const Tensor& dx, const RotaryOptions& options = {});

// ---- Loss ----

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  double label_smoothing = 0;
};
// logits [n, vocab], targets [n] (i32 or i64); loss and lse f32 [n].
void cross_entropy(Stream& stream, const Tensor& logits, const Tensor& targets, const Tensor& loss, const Tensor& lse,
                   const CrossEntropyOptions& options = {});
void cross_entropy_backward(Stream& stream, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& dloss, const Tensor& dlogits, const CrossEntropyOptions& options = {});

// ---- Attention ----

// q, o [batch, heads, seq_q, dim]; k, v [batch, kv_heads, seq_k, dim]; lse f32 [batch, heads, seq_q].
void attention(Stream& stream, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& lse,
               double scale, bool causal = true);
void attention_backward(Stream& stream, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout, const Tensor& dq, const Tensor& dk, const Tensor& dv,
                        double scale, bool causal = true);

// ---- Random numbers (Philox-4x32-10, the same on every device) ----

struct Philox {
  uint64_t seed = 0;
  uint64_t offset = 0;  // advance by philox_counters(numel) between draws
};
uint64_t philox_counters(int64_t numel);
// mask (optional) receives which elements were kept.
void dropout(Stream& stream, const Tensor& x, const Tensor& y, double p, const Philox& rng, const Tensor& mask = {});
void uniform(Stream& stream, const Tensor& y, double low, double high, const Philox& rng);
void normal(Stream& stream, const Tensor& y, double mean, double std, const Philox& rng);

// ---- Optimizer and gradient utilities ----

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double grad_scale = 1;  // multiplies the gradients first (e.g. 1 / number of micro-batches)
  int64_t step = 1;       // 1 for the first step
};
// Updates params (f32), exp_avgs and exp_avg_sqs in place; model_params (empty, or one per param with
// undefined entries skipped) receive f16/bf16 copies. Nothing changes if found_inf holds non-zero.
void adamw(Stream& stream, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
           const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
           const std::vector<Tensor>& model_params, const AdamWOptions& options, const Tensor& found_inf = {});
// out: f32 with one element.
void grad_norm(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& out, double norm_type = 2);
void clip_by_norm(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& norm, double max_norm,
                  double eps = 1e-6);
void unscale(Stream& stream, const std::vector<Tensor>& tensors, const Tensor& found_inf, double inv_scale);

// ---- Elementwise (inputs broadcast to y's shape, NumPy rules) ----

enum class BinaryOp { add, sub, mul, div, pow, maximum, minimum };
void binary(Stream& stream, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y);
void binary(Stream& stream, BinaryOp op, const Tensor& x, double scalar, const Tensor& y);
void binary(Stream& stream, BinaryOp op, double scalar, const Tensor& x, const Tensor& y);
inline void add(Stream& s, const Tensor& a, const Tensor& b, const Tensor& y) {
  binary(s, BinaryOp::add, a, b, y);
}
inline void sub(Stream& s, const Tensor& a, const Tensor& b, const Tensor& y) {
  binary(s, BinaryOp::sub, a, b, y);
}
inline void mul(Stream& s, const Tensor& a, const Tensor& b, const Tensor& y) {
  binary(s, BinaryOp::mul, a, b, y);
}
inline void div(Stream& s, const Tensor& a, const Tensor& b, const Tensor& y) {
  binary(s, BinaryOp::div, a, b, y);
}

enum class UnaryOp { exp, log, sqrt, rsqrt, neg, reciprocal };
void unary(Stream& stream, UnaryOp op, const Tensor& x, const Tensor& y);

void where(Stream& stream, const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& y);
void masked_fill(Stream& stream, const Tensor& x, const Tensor& mask, double value, const Tensor& y);

// ---- Reductions ----

enum class ReduceOp { sum, mean, max, amax };
// y: x's shape without `dims` (or with size 1 there, keepdim); x's dtype or f32. For max over one
// dimension, indices (optional, i64 of y's shape) receives where the maximum is.
void reduce(Stream& stream, ReduceOp op, const Tensor& x, const std::vector<int>& dims, const Tensor& y,
            bool keepdim = false, const Tensor& indices = {});

// ---- Data movement and factories ----

void copy(Stream& stream, const Tensor& x, const Tensor& y);  // with dtype conversion; x broadcasts to y
void fill(Stream& stream, const Tensor& y, double value);
void arange(Stream& stream, const Tensor& y, double start, double step = 1);
void index_select(Stream& stream, const Tensor& x, int dim, const Tensor& indices, const Tensor& y);
void gather(Stream& stream, const Tensor& x, int dim, const Tensor& indices, const Tensor& y);
// y += src scattered along dim (y is read and written).
void scatter_add(Stream& stream, const Tensor& y, int dim, const Tensor& indices, const Tensor& src);

}  // namespace h2::ops
