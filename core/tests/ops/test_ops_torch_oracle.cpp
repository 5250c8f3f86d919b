// LibTorch as an independent oracle: on random inputs, every operator ATen also has agrees with
// ATen computed in fp64 (forward, and backward through ATen's own backward or autograd). The
// reference is thereby checked by someone else's code, not only by our own derivations.
#include <torch/torch.h>

#include "ops_test_support.hpp"

namespace h2::test {
namespace {

constexpr double kRtol = 1e-10, kAtol = 1e-12;

class TorchOracle : public OpsTest {
 protected:
  at::Tensor to_torch(const Tensor& t) {
    Values v = host(t);
    return torch::from_blob(v.data(), t.shape(), torch::kDouble).clone();
  }
  Tensor from_torch(const at::Tensor& t, DType dtype = DType::f64) {
    at::Tensor c = t.detach().to(torch::kDouble).contiguous();
    const Values v(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    return T(v, Shape(c.sizes().begin(), c.sizes().end()), dtype);
  }
  at::Tensor rand(Shape shape, uint32_t seed) {
    return torch::from_blob(random(static_cast<size_t>(shape_numel(shape)), seed).data(), shape, torch::kDouble)
        .clone();
  }
  testing::AssertionResult agrees(const Tensor& ours, const at::Tensor& theirs, double rtol = kRtol,
                                  double atol = kAtol) {
    at::Tensor c = theirs.detach().to(torch::kDouble).contiguous();
    const Values expected(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    return near(host(ours), expected, rtol, atol);
  }
};

TEST_F(TorchOracle, Gemm) {
  at::Tensor a = rand({3, 5, 7}, 1), b = rand({3, 7, 4}, 2), c0 = rand({3, 5, 4}, 3), bias = rand({4}, 4);
  Tensor c = from_torch(c0);
  ops::gemm(stream_, from_torch(a), from_torch(b), c, {.alpha = 0.5, .beta = -2}, from_torch(bias));
  EXPECT_TRUE(agrees(c, 0.5 * at::matmul(a, b) - 2 * c0 + bias));
  Tensor ct = empty({5, 4});
  at::Tensor at2 = rand({7, 5}, 5), bt2 = rand({4, 7}, 6);
  ops::gemm(stream_, from_torch(at2), from_torch(bt2), ct, {.transpose_a = true, .transpose_b = true});
  EXPECT_TRUE(agrees(ct, at::matmul(at2.t(), bt2.t())));
}

TEST_F(TorchOracle, SoftmaxScaledCausalAndBackward) {
  at::Tensor x = rand({2, 5, 7}, 7).requires_grad_(), g = rand({2, 5, 7}, 8);
  at::Tensor mask = at::ones({5, 7}, torch::kBool).triu(7 - 5 + 1);
  at::Tensor expected = at::softmax((0.8 * x).masked_fill(mask, -INFINITY), -1);
  expected.backward(g);
  Tensor y = empty({2, 5, 7}), dx = empty({2, 5, 7});
  ops::softmax(stream_, from_torch(x), y, 0.8, true);
  EXPECT_TRUE(agrees(y, expected));
  ops::softmax_backward(stream_, y, from_torch(g), dx, 0.8);
  EXPECT_TRUE(agrees(dx, x.grad()));
}

TEST_F(TorchOracle, LayerNormAndItsBackward) {
  at::Tensor x = rand({6, 10}, 9), w = rand({10}, 10), b = rand({10}, 11), g = rand({6, 10}, 12);
  auto [y_t, mean_t, rstd_t] = at::native_layer_norm(x, {10}, w, b, 1e-5);
  Tensor y = empty({6, 10}), mean = empty({6}), rstd = empty({6});
  ops::layer_norm(stream_, from_torch(x), from_torch(w), from_torch(b), y, mean, rstd, 1e-5);
  EXPECT_TRUE(agrees(y, y_t));
  EXPECT_TRUE(agrees(mean, mean_t.reshape({6})));
  EXPECT_TRUE(agrees(rstd, rstd_t.reshape({6})));
  auto [dx_t, dw_t, db_t] = at::native_layer_norm_backward(g, x, {10}, mean_t, rstd_t, w, b, {true, true, true});
  Tensor dx = empty({6, 10}), dw = empty({10}), db = empty({10});
  ops::layer_norm_backward(stream_, from_torch(x), from_torch(w), mean, rstd, from_torch(g), dx, dw, db);
  EXPECT_TRUE(agrees(dx, dx_t));
  EXPECT_TRUE(agrees(dw, dw_t));
  EXPECT_TRUE(agrees(db, db_t));
}

TEST_F(TorchOracle, RmsNormAgainstAutogradOfItsDefinition) {
  at::Tensor x = rand({4, 8}, 13).requires_grad_(), w = rand({8}, 14).requires_grad_(), g = rand({4, 8}, 15);
  at::Tensor expected = x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-6) * w;
  expected.backward(g);
  Tensor y = empty({4, 8}), rstd = empty({4}), dx = empty({4, 8}), dw = empty({8});
  ops::rms_norm(stream_, from_torch(x), from_torch(w), y, rstd, 1e-6);
  EXPECT_TRUE(agrees(y, expected));
  ops::rms_norm_backward(stream_, from_torch(x), from_torch(w), rstd, from_torch(g), dx, dw);
  EXPECT_TRUE(agrees(dx, x.grad()));
  EXPECT_TRUE(agrees(dw, w.grad()));
}

TEST_F(TorchOracle, GeluSiluSwiglu) {
  at::Tensor x = 3 * rand({50}, 16), g = rand({50}, 17), up = rand({50}, 18);
  Tensor y = empty({50}), dx = empty({50});
  for (auto [approximation, name] :
       {std::pair{ops::GeluApproximation::none, "none"}, std::pair{ops::GeluApproximation::tanh, "tanh"}}) {
    ops::gelu(stream_, from_torch(x), y, approximation);
    EXPECT_TRUE(agrees(y, at::gelu(x, name))) << name;
    ops::gelu_backward(stream_, from_torch(x), from_torch(g), dx, approximation);
    EXPECT_TRUE(agrees(dx, at::gelu_backward(g, x, name))) << name;
  }
  ops::silu(stream_, from_torch(x), y);
  EXPECT_TRUE(agrees(y, at::silu(x)));
  ops::silu_backward(stream_, from_torch(x), from_torch(g), dx);
  EXPECT_TRUE(agrees(dx, at::silu_backward(g, x)));

  at::Tensor gate = x.clone().requires_grad_(), u = up.clone().requires_grad_();
  at::Tensor expected = at::silu(gate) * u;
  expected.backward(g);
  Tensor dgate = empty({50}), dup = empty({50});
  ops::swiglu(stream_, from_torch(x), from_torch(up), y);
  EXPECT_TRUE(agrees(y, expected));
  ops::swiglu_backward(stream_, from_torch(x), from_torch(up), from_torch(g), dgate, dup);
  EXPECT_TRUE(agrees(dgate, gate.grad()));
  EXPECT_TRUE(agrees(dup, u.grad()));
}

TEST_F(TorchOracle, EmbeddingAndItsBackward) {
  at::Tensor w = rand({11, 6}, 19), g = rand({4, 3, 6}, 20);
  at::Tensor idx = at::randint(0, 11, {4, 3}, at::TensorOptions().dtype(torch::kLong));
  Tensor ids = T(Values(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + 12), {4, 3}, DType::i64);
  Tensor y = empty({4, 3, 6}), dw = empty({11, 6});
  ops::embedding(stream_, from_torch(w), ids, y);
  EXPECT_TRUE(agrees(y, at::embedding(w, idx)));
  ops::embedding_backward(stream_, ids, from_torch(g), dw);
  EXPECT_TRUE(agrees(dw, at::embedding_dense_backward(g, idx, 11, -1, false)));
}

TEST_F(TorchOracle, RotaryAgainstTheRotateHalfFormula) {
  const int64_t seq = 5, heads = 2, dim = 8;
  at::Tensor x = rand({2, seq, heads, dim}, 21);
  at::Tensor inv_freq = at::pow(10000.0, -at::arange(0, dim, 2, torch::kDouble) / dim);
  at::Tensor angles = at::outer(at::arange(3, 3 + seq, torch::kDouble), inv_freq);  // position offset 3
  at::Tensor cos = at::cat({angles.cos(), angles.cos()}, -1).view({seq, 1, dim});
  at::Tensor sin = at::cat({angles.sin(), angles.sin()}, -1).view({seq, 1, dim});
  at::Tensor rotated_half = at::cat({-x.narrow(-1, dim / 2, dim / 2), x.narrow(-1, 0, dim / 2)}, -1);
  Tensor y = empty({2, seq, heads, dim});
  ops::rotary(stream_, from_torch(x), y, {.position_offset = 3});
  EXPECT_TRUE(agrees(y, x * cos + rotated_half * sin));
}

TEST_F(TorchOracle, CrossEntropyWithIgnoreIndexAndSmoothing) {
  at::Tensor logits = (4 * rand({6, 9}, 22)).requires_grad_(), g = rand({6}, 23);
  at::Tensor targets = torch::tensor({3, -100, 0, 8, 5, -100}, torch::kLong);
  at::Tensor expected = at::cross_entropy_loss(logits, targets, {}, at::Reduction::None, -100, 0.15);
  expected.backward(g);
  Tensor t = T({3, -100, 0, 8, 5, -100}, {6}, DType::i64);
  Tensor loss = empty({6}), lse = empty({6}), dlogits = empty({6, 9});
  const ops::CrossEntropyOptions options{.ignore_index = -100, .label_smoothing = 0.15};
  ops::cross_entropy(stream_, from_torch(logits), t, loss, lse, options);
  EXPECT_TRUE(agrees(loss, expected));
  EXPECT_TRUE(agrees(lse, at::logsumexp(logits, -1)));
  ops::cross_entropy_backward(stream_, from_torch(logits), t, lse, from_torch(g), dlogits, options);
  EXPECT_TRUE(agrees(dlogits, logits.grad()));
}

TEST_F(TorchOracle, GroupedQueryCausalAttentionAndBackward) {
  const int64_t batch = 2, heads = 4, kv_heads = 2, seq = 6, dim = 8;
  const double scale = 1 / std::sqrt(static_cast<double>(dim));
  at::Tensor q = rand({batch, heads, seq, dim}, 24).requires_grad_();
  at::Tensor k = rand({batch, kv_heads, seq, dim}, 25).requires_grad_();
  at::Tensor v = rand({batch, kv_heads, seq, dim}, 26).requires_grad_();
  at::Tensor g = rand({batch, heads, seq, dim}, 27);
  at::Tensor kk = k.repeat_interleave(heads / kv_heads, 1), vv = v.repeat_interleave(heads / kv_heads, 1);
  at::Tensor scores = at::matmul(q, kk.transpose(-1, -2)) * scale;
  scores = scores.masked_fill(at::ones({seq, seq}, torch::kBool).triu(1), -INFINITY);
  at::Tensor expected = at::matmul(at::softmax(scores, -1), vv);
  expected.backward(g);

  Tensor tq = from_torch(q), tk = from_torch(k), tv = from_torch(v);
  Tensor o = empty({batch, heads, seq, dim}), lse = empty({batch, heads, seq});
  ops::attention(stream_, tq, tk, tv, o, lse, scale, true);
  EXPECT_TRUE(agrees(o, expected));
  EXPECT_TRUE(agrees(lse, at::logsumexp(scores, -1)));
  Tensor dq = empty(tq.shape()), dk = empty(tk.shape()), dv = empty(tv.shape());
  ops::attention_backward(stream_, tq, tk, tv, o, lse, from_torch(g), dq, dk, dv, scale, true);
  EXPECT_TRUE(agrees(dq, q.grad()));
  EXPECT_TRUE(agrees(dk, k.grad()));
  EXPECT_TRUE(agrees(dv, v.grad()));
}

TEST_F(TorchOracle, AdamWAgainstTorchOptim) {
  at::Tensor p0 = rand({7}, 28).to(torch::kFloat), g1 = rand({7}, 29).to(torch::kFloat),
             g2 = rand({7}, 30).to(torch::kFloat);
  at::Tensor param = p0.clone().requires_grad_();
  torch::optim::AdamW optimizer({param},
                                torch::optim::AdamWOptions(0.05).betas({0.8, 0.95}).eps(1e-6).weight_decay(0.1));
  Tensor p = from_torch(p0, DType::f32), m = T(Values(7, 0.0), {7}, DType::f32), v = T(Values(7, 0.0), {7}, DType::f32);
  int64_t step = 0;
  for (const at::Tensor& grad : {g1, g2}) {
    param.mutable_grad() = grad.clone();
    optimizer.step();
    ops::adamw(stream_, {p}, {from_torch(grad, DType::f32)}, {m}, {v}, {},
               {.lr = 0.05, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6, .weight_decay = 0.1, .step = ++step});
  }
  EXPECT_TRUE(agrees(p, param, 1e-6, 1e-7));  // torch computes in f32, the reference in f64
}

TEST_F(TorchOracle, GradientNormAndClippingAgainstClipGradNorm) {
  at::Tensor a = rand({5}, 31).requires_grad_(), b = rand({3, 4}, 32).requires_grad_();
  a.mutable_grad() = 3 * rand({5}, 33);
  b.mutable_grad() = 3 * rand({3, 4}, 34);
  Tensor ga = from_torch(a.grad()), gb = from_torch(b.grad()), norm = empty({1});
  const double total = torch::nn::utils::clip_grad_norm_(std::vector<at::Tensor>{a, b}, 1.5);
  ops::grad_norm(stream_, {ga, gb}, norm);
  EXPECT_TRUE(near(host(norm), {total}, kRtol, kAtol));
  ops::clip_by_norm(stream_, {ga, gb}, norm, 1.5);
  EXPECT_TRUE(agrees(ga, a.grad()));
  EXPECT_TRUE(agrees(gb, b.grad()));
}

TEST_F(TorchOracle, ElementwiseWithBroadcasting) {
  at::Tensor a = rand({3, 1, 4}, 35), b = rand({5, 1}, 36), pa = a.abs() + 0.5;
  Tensor y = empty({3, 5, 4});
  const std::pair<ops::BinaryOp, at::Tensor> cases[] = {{ops::BinaryOp::add, a + b},
                                                        {ops::BinaryOp::sub, a - b},
                                                        {ops::BinaryOp::mul, a * b},
                                                        {ops::BinaryOp::div, a / b},
                                                        {ops::BinaryOp::maximum, at::maximum(a, b)},
                                                        {ops::BinaryOp::minimum, at::minimum(a, b)}};
  for (const auto& [op, expected] : cases) {
    ops::binary(stream_, op, from_torch(a), from_torch(b), y);
    EXPECT_TRUE(agrees(y, expected)) << static_cast<int>(op);
  }
  ops::binary(stream_, ops::BinaryOp::pow, from_torch(pa), from_torch(b), y);
  EXPECT_TRUE(agrees(y, at::pow(pa, b)));
  Tensor u = empty({3, 1, 4});
  const std::pair<ops::UnaryOp, at::Tensor> unary_cases[] = {
      {ops::UnaryOp::exp, a.exp()},      {ops::UnaryOp::log, pa.log()}, {ops::UnaryOp::sqrt, pa.sqrt()},
      {ops::UnaryOp::rsqrt, pa.rsqrt()}, {ops::UnaryOp::neg, -a},       {ops::UnaryOp::reciprocal, pa.reciprocal()}};
  for (const auto& [op, expected] : unary_cases) {
    const bool positive = op != ops::UnaryOp::exp && op != ops::UnaryOp::neg;
    ops::unary(stream_, op, from_torch(positive ? pa : a), u);
    EXPECT_TRUE(agrees(u, expected)) << static_cast<int>(op);
  }
  at::Tensor cond = rand({3, 5, 4}, 37) > 0;
  Tensor tcond = from_torch(cond.to(torch::kDouble), DType::boolean);
  ops::where(stream_, tcond, from_torch(a), from_torch(b), y);
  EXPECT_TRUE(agrees(y, at::where(cond, a, b)));
}

TEST_F(TorchOracle, Reductions) {
  at::Tensor x = rand({4, 5, 6}, 38);
  Tensor tx = from_torch(x);
  Tensor s = empty({4, 6}), m = empty({5}), mx = empty({4, 5, 1}), idx = empty({4, 5, 1}, DType::i64), am = empty({6});
  ops::reduce(stream_, ops::ReduceOp::sum, tx, {1}, s);
  EXPECT_TRUE(agrees(s, x.sum(at::IntArrayRef{1})));
  ops::reduce(stream_, ops::ReduceOp::mean, tx, {0, 2}, m);
  EXPECT_TRUE(agrees(m, x.mean(at::IntArrayRef{0, 2})));
  ops::reduce(stream_, ops::ReduceOp::max, tx, {2}, mx, true, idx);
  auto [values, indices] = x.max(2, true);
  EXPECT_TRUE(agrees(mx, values));
  EXPECT_TRUE(agrees(idx, indices));
  ops::reduce(stream_, ops::ReduceOp::amax, tx, {0, 1}, am);
  EXPECT_TRUE(agrees(am, x.abs().amax(at::IntArrayRef{0, 1})));
}

TEST_F(TorchOracle, Fp32ToLowPrecisionRoundsLikeATen) {
  // ATen rounds f32 to f16 and bf16 to nearest even too; compare bit for bit on awkward values.
  at::Tensor x =
      at::cat({rand({4000}, 39) * 70000, rand({1000}, 40) * 1e-6, rand({1000}, 41) * 3e38}).to(torch::kFloat);
  Tensor tx = from_torch(x, DType::f32);
  for (auto [dtype, scalar] : {std::pair{DType::f16, torch::kHalf}, std::pair{DType::bf16, torch::kBFloat16}}) {
    Tensor y = empty({6000}, dtype);
    ops::copy(stream_, tx, y);
    EXPECT_TRUE(agrees(y, x.to(scalar), 0, 0)) << dtype_name(dtype);
  }
}

TEST_F(TorchOracle, IndexSelectGatherScatterAdd) {
  at::Tensor x = rand({5, 6}, 42);
  at::Tensor rows = torch::tensor({4, 0, 4, 2}, torch::kLong);
  at::Tensor idx = at::randint(0, 6, {5, 3}, at::TensorOptions().dtype(torch::kLong));
  Tensor trows = T({4, 0, 4, 2}, {4}, DType::i64);
  Tensor tidx = T(Values(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + 15), {5, 3}, DType::i64);
  Tensor sel = empty({4, 6}), gat = empty({5, 3});
  ops::index_select(stream_, from_torch(x), 0, trows, sel);
  EXPECT_TRUE(agrees(sel, x.index_select(0, rows)));
  ops::gather(stream_, from_torch(x), 1, tidx, gat);
  EXPECT_TRUE(agrees(gat, x.gather(1, idx)));
  at::Tensor src = rand({5, 3}, 43);
  Tensor y = from_torch(x);
  ops::scatter_add(stream_, y, 1, tidx, from_torch(src));
  EXPECT_TRUE(agrees(y, x.scatter_add(1, idx, src)));
}

}  // namespace
}  // namespace h2::test
