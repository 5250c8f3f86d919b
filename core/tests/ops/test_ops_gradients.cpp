// Every backward operator against central finite differences of its forward, in f64: the gradient
// of L = sum(G * forward(inputs)) for a random upstream gradient G (never ones).
#include "ops_test_support.hpp"

namespace h2::test {
namespace {

constexpr double kRtol = 1e-6, kAtol = 1e-8;

class Gradients : public OpsTest {
 protected:
  // The gradient of sum(upstream * forward(inputs)) w.r.t. inputs[which], by finite differences.
  Values numeric(const std::function<Values(const std::vector<Values>&)>& forward, const std::vector<Values>& inputs,
                 size_t which, const Values& upstream) {
    return numeric_gradient(forward, inputs, which, upstream);
  }
};

TEST_F(Gradients, Softmax) {
  const Shape shape{3, 4};
  const Values x = random(12, 1), g = random(12, 2);
  for (bool causal : {false, true}) {
    auto forward = [&](const std::vector<Values>& in) {
      Tensor y = empty(shape);
      ops::softmax(stream_, T(in[0], shape), y, 0.7, causal);
      return host(y);
    };
    Tensor y = empty(shape), dx = empty(shape);
    ops::softmax(stream_, T(x, shape), y, 0.7, causal);
    ops::softmax_backward(stream_, y, T(g, shape), dx, 0.7);
    EXPECT_TRUE(near(host(dx), numeric(forward, {x}, 0, g), kRtol, kAtol)) << "causal " << causal;
  }
}

TEST_F(Gradients, LayerNormAllThreeGradients) {
  const Shape shape{3, 5};
  const Values x = random(15, 3), w = random(5, 4), b = random(5, 5), g = random(15, 6);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor y = empty(shape), mean = empty({3}, DType::f32), rstd = empty({3}, DType::f32);
    ops::layer_norm(stream_, T(in[0], shape), T(in[1], {5}), T(in[2], {5}), y, mean, rstd, 1e-5);
    return host(y);
  };
  // The backward takes mean and rstd as the forward saved them; in f64 they are exact enough only if
  // stored in f64, so recompute them here at full precision rather than reading the f32 ones.
  Values mean(3), rstd(3);
  for (int r = 0; r < 3; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 5; ++j) m += x[static_cast<size_t>(r * 5 + j)] / 5;
    for (int j = 0; j < 5; ++j) v += std::pow(x[static_cast<size_t>(r * 5 + j)] - m, 2) / 5;
    mean[static_cast<size_t>(r)] = m;
    rstd[static_cast<size_t>(r)] = 1 / std::sqrt(v + 1e-5);
  }
  Tensor dx = empty(shape), dw = empty({5}), db = empty({5});
  ops::layer_norm_backward(stream_, T(x, shape), T(w, {5}), T(mean, {3}, DType::f32), T(rstd, {3}, DType::f32),
                           T(g, shape), dx, dw, db);
  // f32 statistics limit the agreement to about 1e-7 relative.
  EXPECT_TRUE(near(host(dx), numeric(forward, {x, w, b}, 0, g), 1e-5, 1e-6));
  EXPECT_TRUE(near(host(dw), numeric(forward, {x, w, b}, 1, g), 1e-5, 1e-6));
  EXPECT_TRUE(near(host(db), numeric(forward, {x, w, b}, 2, g), kRtol, kAtol));
}

TEST_F(Gradients, RmsNorm) {
  const Shape shape{2, 6};
  const Values x = random(12, 7), w = random(6, 8), g = random(12, 9);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor y = empty(shape), rstd = empty({2}, DType::f32);
    ops::rms_norm(stream_, T(in[0], shape), T(in[1], {6}), y, rstd, 1e-6);
    return host(y);
  };
  Tensor y = empty(shape), rstd = empty({2}, DType::f32), dx = empty(shape), dw = empty({6});
  ops::rms_norm(stream_, T(x, shape), T(w, {6}), y, rstd, 1e-6);
  ops::rms_norm_backward(stream_, T(x, shape), T(w, {6}), rstd, T(g, shape), dx, dw);
  EXPECT_TRUE(near(host(dx), numeric(forward, {x, w}, 0, g), 1e-5, 1e-6));
  EXPECT_TRUE(near(host(dw), numeric(forward, {x, w}, 1, g), 1e-5, 1e-6));
}

TEST_F(Gradients, GeluBothFormsAndSilu) {
  const Values x = random(10, 10), g = random(10, 11);
  for (auto approximation : {ops::GeluApproximation::none, ops::GeluApproximation::tanh}) {
    auto forward = [&](const std::vector<Values>& in) {
      Tensor y = empty({10});
      ops::gelu(stream_, T(in[0], {10}), y, approximation);
      return host(y);
    };
    Tensor dx = empty({10});
    ops::gelu_backward(stream_, T(x, {10}), T(g, {10}), dx, approximation);
    EXPECT_TRUE(near(host(dx), numeric(forward, {x}, 0, g), kRtol, kAtol));
  }
  auto silu_forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({10});
    ops::silu(stream_, T(in[0], {10}), y);
    return host(y);
  };
  Tensor dx = empty({10});
  ops::silu_backward(stream_, T(x, {10}), T(g, {10}), dx);
  EXPECT_TRUE(near(host(dx), numeric(silu_forward, {x}, 0, g), kRtol, kAtol));
}

TEST_F(Gradients, Swiglu) {
  const Values gate = random(8, 12), up = random(8, 13), g = random(8, 14);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({8});
    ops::swiglu(stream_, T(in[0], {8}), T(in[1], {8}), y);
    return host(y);
  };
  Tensor dgate = empty({8}), dup = empty({8});
  ops::swiglu_backward(stream_, T(gate, {8}), T(up, {8}), T(g, {8}), dgate, dup);
  EXPECT_TRUE(near(host(dgate), numeric(forward, {gate, up}, 0, g), kRtol, kAtol));
  EXPECT_TRUE(near(host(dup), numeric(forward, {gate, up}, 1, g), kRtol, kAtol));
}

TEST_F(Gradients, EmbeddingWeights) {
  const Values w = random(12, 15), g = random(10, 16);
  Tensor ids = T({3, 1, 3, 0, 5}, {5}, DType::i64);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({5, 2});
    ops::embedding(stream_, T(in[0], {6, 2}), ids, y);
    return host(y);
  };
  Tensor dw = empty({6, 2});
  ops::embedding_backward(stream_, ids, T(g, {5, 2}), dw);
  EXPECT_TRUE(near(host(dw), numeric(forward, {w}, 0, g), kRtol, kAtol));
}

TEST_F(Gradients, Rotary) {
  const Shape shape{2, 3, 2, 4};  // batch, seq, heads, head_dim
  const Values x = random(48, 17), g = random(48, 18);
  for (bool interleaved : {false, true}) {
    const ops::RotaryOptions options{.base = 50, .position_offset = 3, .interleaved = interleaved};
    auto forward = [&](const std::vector<Values>& in) {
      Tensor y = empty(shape);
      ops::rotary(stream_, T(in[0], shape), y, options);
      return host(y);
    };
    Tensor dx = empty(shape);
    ops::rotary_backward(stream_, T(g, shape), dx, options);
    EXPECT_TRUE(near(host(dx), numeric(forward, {x}, 0, g), kRtol, kAtol)) << "interleaved " << interleaved;
  }
}

TEST_F(Gradients, CrossEntropyWithSmoothingAndAnIgnoredRow) {
  const Values logits = random(12, 19), g = random(3, 20);
  Tensor targets = T({2, -100, 0}, {3}, DType::i64);
  const ops::CrossEntropyOptions options{.label_smoothing = 0.2};
  auto forward = [&](const std::vector<Values>& in) {
    Tensor loss = empty({3}), lse = empty({3});
    ops::cross_entropy(stream_, T(in[0], {3, 4}), targets, loss, lse, options);
    return host(loss);
  };
  // In f64 end to end: loss and lse as f64 keep the finite differences exact.
  Tensor loss = empty({3}), lse = empty({3}), dlogits = empty({3, 4});
  ops::cross_entropy(stream_, T(logits, {3, 4}), targets, loss, lse, options);
  ops::cross_entropy_backward(stream_, T(logits, {3, 4}), targets, lse, T(g, {3}), dlogits, options);
  EXPECT_TRUE(near(host(dlogits), numeric(forward, {logits}, 0, g), kRtol, kAtol));
}

TEST_F(Gradients, AttentionCausalWithGroupedHeads) {
  const Shape qs{2, 4, 3, 5}, ks{2, 2, 3, 5}, ls{2, 4, 3};
  const Values q = random(120, 21), k = random(60, 22), v = random(60, 23), g = random(120, 24);
  for (bool causal : {true, false}) {
    auto forward = [&](const std::vector<Values>& in) {
      Tensor o = empty(qs), lse = empty(ls);
      ops::attention(stream_, T(in[0], qs), T(in[1], ks), T(in[2], ks), o, lse, 0.4, causal);
      return host(o);
    };
    Tensor tq = T(q, qs), tk = T(k, ks), tv = T(v, ks), o = empty(qs), lse = empty(ls);
    ops::attention(stream_, tq, tk, tv, o, lse, 0.4, causal);
    Tensor dq = empty(qs), dk = empty(ks), dv = empty(ks);
    ops::attention_backward(stream_, tq, tk, tv, o, lse, T(g, qs), dq, dk, dv, 0.4, causal);
    EXPECT_TRUE(near(host(dq), numeric(forward, {q, k, v}, 0, g), kRtol, kAtol)) << "causal " << causal;
    EXPECT_TRUE(near(host(dk), numeric(forward, {q, k, v}, 1, g), kRtol, kAtol)) << "causal " << causal;
    EXPECT_TRUE(near(host(dv), numeric(forward, {q, k, v}, 2, g), kRtol, kAtol)) << "causal " << causal;
  }
}

TEST_F(Gradients, AttentionOnAPermutedLayout) {
  // Memory laid out [batch, seq, heads, dim], passed as a permuted view.
  const Values q = random(24, 25), k = random(24, 26), v = random(24, 27), g = random(24, 28);
  auto view = [&](const Values& values) { return T(values, {1, 3, 2, 4}).permute({0, 2, 1, 3}); };
  Tensor o = empty({1, 2, 3, 4}), lse = empty({1, 2, 3});
  ops::attention(stream_, view(q), view(k), view(v), o, lse, 0.5, true);
  Tensor dense_o = empty({1, 2, 3, 4});
  Tensor dq = empty({1, 2, 3, 4}), dk = empty({1, 2, 3, 4}), dv = empty({1, 2, 3, 4});
  ops::attention_backward(stream_, view(q), view(k), view(v), o, lse, view(g), dq, dk, dv, 0.5, true);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor out = empty({1, 2, 3, 4}), l = empty({1, 2, 3});
    ops::attention(stream_, view(in[0]), view(in[1]), view(in[2]), out, l, 0.5, true);
    Tensor back = empty({1, 3, 2, 4});  // back to the input layout so indices match the inputs'
    ops::copy(stream_, out.permute({0, 2, 1, 3}), back);
    return host(back);
  };
  Tensor dq_layout = empty({1, 3, 2, 4});
  ops::copy(stream_, dq.permute({0, 2, 1, 3}), dq_layout);
  EXPECT_TRUE(near(host(dq_layout), numeric(forward, {q, k, v}, 0, g), kRtol, kAtol));
}

TEST_F(Gradients, DropoutBackwardIsDropoutOfTheGradient) {
  const Values x = random(40, 29), g = random(40, 30);
  const ops::Philox rng{.seed = 11, .offset = 4};
  auto forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({40});
    ops::dropout(stream_, T(in[0], {40}), y, 0.3, rng);
    return host(y);
  };
  Tensor dx = empty({40});
  ops::dropout(stream_, T(g, {40}), dx, 0.3, rng);
  EXPECT_TRUE(near(host(dx), numeric(forward, {x}, 0, g), kRtol, kAtol));
}

TEST_F(Gradients, GatherAndIndexSelectBackwardsAreScatterAdds) {
  const Values x = random(12, 31), g = random(6, 32);
  Tensor idx = T({2, 0, 2, 1, 1, 3}, {3, 2}, DType::i64);
  auto gather_forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({3, 2});
    ops::gather(stream_, T(in[0], {3, 4}), 1, idx, y);
    return host(y);
  };
  Tensor dx = T(Values(12, 0.0), {3, 4});
  ops::scatter_add(stream_, dx, 1, idx, T(g, {3, 2}));
  EXPECT_TRUE(near(host(dx), numeric(gather_forward, {x}, 0, g), kRtol, kAtol));

  Tensor rows = T({2, 0, 2}, {3}, DType::i64);
  const Values gs = random(12, 33);
  auto select_forward = [&](const std::vector<Values>& in) {
    Tensor y = empty({3, 4});
    ops::index_select(stream_, T(in[0], {3, 4}), 0, rows, y);
    return host(y);
  };
  Tensor dsel = T(Values(12, 0.0), {3, 4});
  ops::scatter_add(stream_, dsel, 0, rows.unsqueeze(1).expand({3, 4}), T(gs, {3, 4}));
  EXPECT_TRUE(near(host(dsel), numeric(select_forward, {x}, 0, gs), kRtol, kAtol));
}

TEST_F(Gradients, GemmBackwardIsTwoGemms) {
  // dA = dC B^T and dB = A^T dC, with the operators' transpose flags.
  const Values a = random(6, 34), b = random(12, 35), g = random(8, 36);
  auto forward = [&](const std::vector<Values>& in) {
    Tensor c = empty({2, 4});
    ops::gemm(stream_, T(in[0], {2, 3}), T(in[1], {3, 4}), c);
    return host(c);
  };
  Tensor da = empty({2, 3}), db = empty({3, 4}), dc = T(g, {2, 4});
  ops::gemm(stream_, dc, T(b, {3, 4}), da, {.transpose_b = true});
  ops::gemm(stream_, T(a, {2, 3}), dc, db, {.transpose_a = true});
  EXPECT_TRUE(near(host(da), numeric(forward, {a, b}, 0, g), kRtol, kAtol));
  EXPECT_TRUE(near(host(db), numeric(forward, {a, b}, 1, g), kRtol, kAtol));
}

}  // namespace
}  // namespace h2::test
