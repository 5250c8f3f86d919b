// Every operator against values worked out by hand or in closed form, computed in f64 through the
// whole stack (C++ API, validation, C ABI, cpu-reference).
#include <cmath>
#include <limits>
#include <numbers>

#include "ops_test_support.hpp"

namespace h2::test {
namespace {

using testing::HasSubstr;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class Values_ : public OpsTest {};

TEST_F(Values_, GemmMultipliesTransposesScalesAndAddsBias) {
  Tensor a = T({1, 2, 3, 4}, {2, 2}), b = T({5, 6, 7, 8}, {2, 2});
  Tensor c = empty({2, 2});
  ops::gemm(stream_, a, b, c);
  EXPECT_TRUE(near(host(c), {19, 22, 43, 50}));
  ops::gemm(stream_, a, b, c, {.transpose_a = true});  // A^T = [[1,3],[2,4]]
  EXPECT_TRUE(near(host(c), {26, 30, 38, 44}));
  ops::gemm(stream_, a, b, c, {.transpose_b = true});  // B^T = [[5,7],[6,8]]
  EXPECT_TRUE(near(host(c), {17, 23, 39, 53}));
  Tensor acc = T({1, 1, 1, 1}, {2, 2});
  ops::gemm(stream_, a, b, acc, {.alpha = 2, .beta = 3});
  EXPECT_TRUE(near(host(acc), {41, 47, 89, 103}));
  ops::gemm(stream_, a, b, c, {}, T({100, 200}, {2}));
  EXPECT_TRUE(near(host(c), {119, 222, 143, 250}));
}

TEST_F(Values_, GemmIgnoresCWhenBetaIsZero) {
  Tensor c = T({kNaN, kNaN}, {1, 2});
  ops::gemm(stream_, T({2}, {1, 1}), T({3, 4}, {1, 2}), c);
  EXPECT_TRUE(near(host(c), {6, 8}));
}

TEST_F(Values_, GemmBatchesAndSharesAOneMatrixOperand) {
  Tensor a = T({1, 0, 0, 1, 2, 0, 0, 2}, {2, 2, 2});  // I and 2I
  Tensor b = T({1, 2, 3, 4}, {2, 2});                 // one B for both batches
  Tensor c = empty({2, 2, 2});
  ops::gemm(stream_, a, b, c);
  EXPECT_TRUE(near(host(c), {1, 2, 3, 4, 2, 4, 6, 8}));
  ops::gemm(stream_, a, b.unsqueeze(0), c);  // batch 1 broadcast
  EXPECT_TRUE(near(host(c), {1, 2, 3, 4, 2, 4, 6, 8}));
}

TEST_F(Values_, GemmWithAnEmptyInnerDimensionGivesBias) {
  Tensor c = empty({2, 2});
  ops::gemm(stream_, empty({2, 0}), empty({0, 2}), c, {}, T({1, 2}, {2}));
  EXPECT_TRUE(near(host(c), {1, 2, 1, 2}));
}

TEST_F(Values_, SoftmaxOfLogarithmsIsProportional) {
  Tensor x = T({0, std::log(2.0), std::log(3.0)}, {1, 3}), y = empty({1, 3});
  ops::softmax(stream_, x, y);
  EXPECT_TRUE(near(host(y), {1.0 / 6, 2.0 / 6, 3.0 / 6}));
  ops::softmax(stream_, T({0, 1, 2}, {1, 3}), y, 0.0);  // scale 0: uniform
  EXPECT_TRUE(near(host(y), {1.0 / 3, 1.0 / 3, 1.0 / 3}));
}

TEST_F(Values_, CausalSoftmaxMasksFutureColumns) {
  Tensor y = empty({2, 3});
  // 2 queries over 3 keys: query 0 sees keys 0..1, query 1 sees all.
  ops::softmax(stream_, T({0, 0, 99, 0, 0, 0}, {2, 3}), y, 1.0, true);
  EXPECT_TRUE(near(host(y), {0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3}));
  Tensor masked = empty({3, 1});  // 3 queries over 1 key: the first two see nothing
  ops::softmax(stream_, T({5, 5, 5}, {3, 1}), masked, 1.0, true);
  EXPECT_TRUE(near(host(masked), {0, 0, 1}));
}

TEST_F(Values_, SoftmaxWorksInPlace) {
  Tensor x = T({0, 0}, {1, 2});
  ops::softmax(stream_, x, x);
  EXPECT_TRUE(near(host(x), {0.5, 0.5}));
}

TEST_F(Values_, LayerNormAndRmsNormByHand) {
  Tensor x = T({1, 2, 3, 4}, {1, 4}), y = empty({1, 4});
  Tensor mean = empty({1}, DType::f32), rstd = empty({1}, DType::f32);
  ops::layer_norm(stream_, x, T({1, 1, 2, 2}, {4}), T({0, 0, 0, 10}, {4}), y, mean, rstd, 0.0);
  const double r = 1 / std::sqrt(1.25);
  EXPECT_TRUE(near(host(y), {-1.5 * r, -0.5 * r, 2 * 0.5 * r, 2 * 1.5 * r + 10}));
  EXPECT_TRUE(near(host(mean), {2.5}));
  EXPECT_TRUE(near(host(rstd), {static_cast<float>(r)}));

  Tensor y2 = empty({1, 2}), rstd2 = empty({1}, DType::f32);
  ops::rms_norm(stream_, T({3, 4}, {1, 2}), Tensor(), y2, rstd2, 0.0);
  const double s = 1 / std::sqrt(12.5);
  EXPECT_TRUE(near(host(y2), {3 * s, 4 * s}));
}

TEST_F(Values_, ActivationsAtKnownPoints) {
  Tensor x = T({-1, 0, 1}, {3}), y = empty({3});
  ops::gelu(stream_, x, y);
  EXPECT_TRUE(near(host(y), {-0.15865525393145707, 0, 0.8413447460685429}, 1e-14));
  ops::gelu(stream_, x, y, ops::GeluApproximation::tanh);
  EXPECT_TRUE(near(host(y), {-0.15880800939172324, 0, 0.8411919906082768}, 1e-14));
  ops::silu(stream_, x, y);
  EXPECT_TRUE(near(host(y), {-0.2689414213699951, 0, 0.7310585786300049}, 1e-14));
  ops::swiglu(stream_, x, T({2, 2, 2}, {3}), y);
  EXPECT_TRUE(near(host(y), {-0.5378828427399902, 0, 1.4621171572600098}, 1e-14));
}

// Phi(x) far left of 0 is tiny: 1 + erf(x / sqrt 2) keeps 2% of gelu(-8) and none of gelu(-10), and
// an accelerator computing the same expression with another erf disagreed with it by 3e-4 at -7.
TEST_F(Values_, GeluKeepsItsDigitsFarLeftOfZero) {
  Tensor x = T({-8, -10}, {2}), y = empty({2});
  ops::gelu(stream_, x, y);
  EXPECT_TRUE(near(host(y), {-4.9767684594174555e-15, -7.619853024160593e-23}, 1e-13, 0));
}

TEST_F(Values_, EmbeddingGathersRowsAndItsBackwardSumsThem) {
  Tensor weight = T({0, 1, 10, 11, 20, 21}, {3, 2});
  Tensor ids = T({2, 0, 2}, {3}, DType::i64), y = empty({3, 2});
  ops::embedding(stream_, weight, ids, y);
  EXPECT_TRUE(near(host(y), {20, 21, 0, 1, 20, 21}));
  Tensor dw = empty({3, 2});
  ops::embedding_backward(stream_, ids, T({1, 2, 3, 4, 5, 6}, {3, 2}), dw);
  EXPECT_TRUE(near(host(dw), {3, 4, 0, 0, 6, 8}));
}

TEST_F(Values_, AnIndexOutOfRangeIsAStreamErrorNamingIt) {
  Tensor y = empty({1, 2});
  ops::embedding(stream_, T({0, 1, 2, 3}, {2, 2}), T({7}, {1}, DType::i32), y);
  EXPECT_THAT([&] { stream_.synchronize(); },
              testing::ThrowsMessage<Error>(HasSubstr("embedding: index 7 is outside [0, 2)")));
}

TEST_F(Values_, RotaryRotatesPairsByPositionTimesFrequency) {
  // [seq 2, heads 1, head_dim 4]: position 1 rotates pair (0, 2) by 1 and pair (1, 3) by 100^-1/2... base 100.
  Tensor x = T({1, 1, 0, 0, 1, 1, 0, 0}, {2, 1, 4}), y = empty({2, 1, 4});
  ops::rotary(stream_, x, y, {.base = 100});
  const double slow = 1.0 / 10;  // 100^(-2/4)
  EXPECT_TRUE(near(host(y), {1, 1, 0, 0, std::cos(1.0), std::cos(slow), std::sin(1.0), std::sin(slow)}, 1e-14));
  ops::rotary(stream_, x, y, {.base = 100, .interleaved = true});  // pairs (0,1), (2,3)
  EXPECT_TRUE(near(host(y), {1, 1, 0, 0, std::cos(1.0) - std::sin(1.0), std::sin(1.0) + std::cos(1.0), 0, 0}, 1e-14));
  Tensor back = empty({2, 1, 4});
  ops::rotary(stream_, x, y, {.base = 100, .position_offset = 5});
  ops::rotary_backward(stream_, y, back, {.base = 100, .position_offset = 5});
  EXPECT_TRUE(near(host(back), host(x), 1e-14, 1e-15));
}

TEST_F(Values_, CrossEntropyWithSmoothingAndIgnoredRows) {
  Tensor logits = T({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor loss = empty({2}, DType::f32), lse = empty({2}, DType::f32);
  const double row_lse = std::log(std::exp(1) + std::exp(2) + std::exp(3));
  ops::cross_entropy(stream_, logits, T({2, 1}, {2}, DType::i64), loss, lse);
  EXPECT_TRUE(near(host(loss), {static_cast<float>(row_lse - 3), static_cast<float>(std::log(3.0))}));
  ops::cross_entropy(stream_, logits, T({2, -100}, {2}, DType::i64), loss, lse, {.label_smoothing = 0.3});
  EXPECT_TRUE(near(host(loss), {static_cast<float>(row_lse - 0.7 * 3 - 0.3 * 2), 0}));
  EXPECT_TRUE(near(host(lse), {static_cast<float>(row_lse), static_cast<float>(std::log(3.0))}));
}

TEST_F(Values_, AttentionAveragesValuesOverVisibleKeys) {
  // One head, dim 1; q = k = 0 makes every score equal, so o is the mean of the visible values.
  Tensor q = T({0, 0, 0}, {1, 1, 3, 1}), k = T({0, 0, 0}, {1, 1, 3, 1}), v = T({3, 6, 9}, {1, 1, 3, 1});
  Tensor o = empty({1, 1, 3, 1}), lse = empty({1, 1, 3}, DType::f32);
  ops::attention(stream_, q, k, v, o, lse, 1.0, true);
  EXPECT_TRUE(near(host(o), {3, 4.5, 6}));
  EXPECT_TRUE(near(host(lse), {0, static_cast<float>(std::log(2.0)), static_cast<float>(std::log(3.0))}));
  ops::attention(stream_, q, k, v, o, lse, 1.0, false);
  EXPECT_TRUE(near(host(o), {6, 6, 6}));
}

TEST_F(Values_, GroupedQueryHeadsShareTheirKvHead) {
  // 2 query heads, 1 kv head, one position each: o equals v for both heads.
  Tensor q = T({1, 2}, {1, 2, 1, 1}), k = T({5}, {1, 1, 1, 1}), v = T({7}, {1, 1, 1, 1});
  Tensor o = empty({1, 2, 1, 1}), lse = empty({1, 2, 1}, DType::f32);
  ops::attention(stream_, q, k, v, o, lse, 0.5, true);
  EXPECT_TRUE(near(host(o), {7, 7}));
  EXPECT_TRUE(near(host(lse), {2.5, 5}));
}

TEST_F(Values_, AdamWFirstStepFromZeroState) {
  const double lr = 0.1, wd = 0.5, eps = 1e-8;
  Tensor p = T({1, -2}, {2}, DType::f32), g = T({0.5, -4}, {2}, DType::f32);
  Tensor m = T({0, 0}, {2}, DType::f32), v = T({0, 0}, {2}, DType::f32), model = empty({2}, DType::bf16);
  ops::adamw(stream_, {p}, {g}, {m}, {v}, {model}, {.lr = lr, .eps = eps, .weight_decay = wd, .step = 1});
  // With bias correction the first step moves by lr * g / (|g| + eps) after decay.
  const Values expected = {1 * (1 - lr * wd) - lr * 0.5 / (0.5 + eps), -2 * (1 - lr * wd) + lr * 4 / (4 + eps)};
  EXPECT_TRUE(near(host(p), expected, 1e-7));
  EXPECT_TRUE(near(host(m), {0.05, -0.4}, 1e-7));
  EXPECT_TRUE(near(host(v), {0.00025, 0.016}, 1e-6));
  EXPECT_TRUE(near(host(model), {0.85, -1.8}, 1e-2));
}

TEST_F(Values_, AdamWSkipsTheStepWhenFoundInfIsSet) {
  Tensor p = T({1}, {1}, DType::f32), m = T({0}, {1}, DType::f32), v = T({0}, {1}, DType::f32);
  ops::adamw(stream_, {p}, {T({1}, {1}, DType::f32)}, {m}, {v}, {}, {}, T({1}, {1}, DType::f32));
  EXPECT_TRUE(near(host(p), {1}));
  EXPECT_TRUE(near(host(m), {0}));
}

TEST_F(Values_, GradNormClipAndUnscale) {
  Tensor a = T({3}, {1}), b = T({0, 4}, {2}), norm = empty({1}, DType::f32);
  ops::grad_norm(stream_, {a, b}, norm);
  EXPECT_TRUE(near(host(norm), {5}));
  ops::grad_norm(stream_, {a, b}, norm, kInf);
  EXPECT_TRUE(near(host(norm), {4}));
  ops::grad_norm(stream_, {a, b, T({kNaN}, {1})}, norm);
  EXPECT_TRUE(std::isnan(host(norm)[0]));

  ops::grad_norm(stream_, {a, b}, norm);
  ops::clip_by_norm(stream_, {a, b}, norm, 1.0, 0.0);
  EXPECT_TRUE(near(host(a), {0.6}));
  EXPECT_TRUE(near(host(b), {0, 0.8}));

  Tensor found = T({0}, {1}, DType::f32), g = T({2, 4}, {2});
  ops::unscale(stream_, {g}, found, 0.5);
  EXPECT_TRUE(near(host(g), {1, 2}));
  EXPECT_TRUE(near(host(found), {0}));
  Tensor bad = T({1, kInf}, {2});
  ops::unscale(stream_, {g, bad}, found, 0.5);
  EXPECT_TRUE(near(host(found), {1}));
}

TEST_F(Values_, BinaryOpsBroadcastAndHandleNaN) {
  Tensor y = empty({2, 3});
  ops::add(stream_, T({10, 20}, {2, 1}), T({1, 2, 3}, {3}), y);
  EXPECT_TRUE(near(host(y), {11, 12, 13, 21, 22, 23}));
  Tensor z = empty({3});
  ops::binary(stream_, ops::BinaryOp::pow, T({2, 3, 4}, {3}), T({2}, {1}), z);
  EXPECT_TRUE(near(host(z), {4, 9, 16}));
  ops::binary(stream_, ops::BinaryOp::maximum, T({1, kNaN, 5}, {3}), T({2, 0, 4}, {3}), z);
  EXPECT_TRUE(near(host(z), {2, kNaN, 5}));
  ops::binary(stream_, ops::BinaryOp::sub, 1.0, T({0.25, 1, 2}, {3}), z);  // 1 - x
  EXPECT_TRUE(near(host(z), {0.75, 0, -1}));
  ops::binary(stream_, ops::BinaryOp::div, T({1, 1, 0}, {3}), 0.0, z);
  EXPECT_TRUE(near(host(z), {kInf, kInf, kNaN}));
}

TEST_F(Values_, UnaryOps) {
  Tensor x = T({4}, {1}), y = empty({1});
  const std::pair<ops::UnaryOp, double> cases[] = {{ops::UnaryOp::exp, std::exp(4.0)},
                                                   {ops::UnaryOp::log, std::log(4.0)},
                                                   {ops::UnaryOp::sqrt, 2},
                                                   {ops::UnaryOp::rsqrt, 0.5},
                                                   {ops::UnaryOp::neg, -4},
                                                   {ops::UnaryOp::reciprocal, 0.25}};
  for (auto [op, expected] : cases) {
    ops::unary(stream_, op, x, y);
    EXPECT_TRUE(near(host(y), {expected})) << static_cast<int>(op);
  }
}

TEST_F(Values_, WhereAndMaskedFill) {
  Tensor cond = T({1, 0, 1}, {3}, DType::boolean), y = empty({3});
  ops::where(stream_, cond, T({1, 2, 3}, {3}), T({-1}, {1}), y);
  EXPECT_TRUE(near(host(y), {1, -1, 3}));
  ops::masked_fill(stream_, T({1, 2, 3}, {3}), cond, -kInf, y);
  EXPECT_TRUE(near(host(y), {-kInf, 2, -kInf}));
}

TEST_F(Values_, ReductionsOverChosenDimensions) {
  Tensor x = T({1, -5, 3, 4, 5, 6}, {2, 3});
  Tensor rows = empty({2}), cols = empty({3}), all = empty({}), kept = empty({2, 1});
  ops::reduce(stream_, ops::ReduceOp::sum, x, {1}, rows);
  EXPECT_TRUE(near(host(rows), {-1, 15}));
  ops::reduce(stream_, ops::ReduceOp::mean, x, {0}, cols);
  EXPECT_TRUE(near(host(cols), {2.5, 0, 4.5}));
  ops::reduce(stream_, ops::ReduceOp::sum, x, {0, 1}, all);
  EXPECT_TRUE(near(host(all), {14}));
  ops::reduce(stream_, ops::ReduceOp::amax, x, {-1}, kept, true);
  EXPECT_TRUE(near(host(kept), {5, 6}));
  Tensor indices = empty({2}, DType::i64);
  ops::reduce(stream_, ops::ReduceOp::max, T({1, 7, 7, kNaN, 2, 3}, {2, 3}), {1}, rows, false, indices);
  EXPECT_TRUE(near(host(rows), {7, kNaN}));
  EXPECT_TRUE(near(host(indices), {1, 0}));  // the first maximum; the NaN
  Tensor f32_sum = empty({2}, DType::f32);
  ops::reduce(stream_, ops::ReduceOp::sum, T({1, 2, 3, 4}, {2, 2}, DType::bf16), {1}, f32_sum);
  EXPECT_TRUE(near(host(f32_sum), {3, 7}));
}

TEST_F(Values_, CopyTransposesCastsAndBroadcasts) {
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3}), y = empty({3, 2});
  ops::copy(stream_, x.transpose(0, 1), y);
  EXPECT_TRUE(near(host(y), {1, 4, 2, 5, 3, 6}));
  Tensor ints = empty({6}, DType::i32);
  ops::copy(stream_, T({2.9, -2.9, kNaN, 1e20, -1e20, 0.5}, {6}), ints);
  EXPECT_TRUE(near(host(ints), {2, -2, 0, 2147483647, -2147483648.0, 0}));
  Tensor rows = empty({2, 3});
  ops::copy(stream_, T({7, 8, 9}, {3}), rows);
  EXPECT_TRUE(near(host(rows), {7, 8, 9, 7, 8, 9}));
  Tensor big = empty({1}, DType::i64), big2 = empty({1}, DType::i64);
  std::vector<double> unused;
  ops::fill(stream_, big, 9007199254740993.0);  // 2^53 + 1 is not a double: fill rounds
  ops::copy(stream_, big, big2);
  EXPECT_EQ(host(big2)[0], host(big)[0]);
}

TEST_F(Values_, FillAndArange) {
  Tensor y = empty({4});
  ops::fill(stream_, y, 2.5);
  EXPECT_TRUE(near(host(y), {2.5, 2.5, 2.5, 2.5}));
  ops::arange(stream_, y, 1, 0.5);
  EXPECT_TRUE(near(host(y), {1, 1.5, 2, 2.5}));
  Tensor i = empty({3}, DType::i64);
  ops::arange(stream_, i, 5, -2);
  EXPECT_TRUE(near(host(i), {5, 3, 1}));
}

TEST_F(Values_, IndexSelectGatherAndScatterAdd) {
  Tensor x = T({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor cols = empty({2, 2});
  ops::index_select(stream_, x, 1, T({2, 0}, {2}, DType::i64), cols);
  EXPECT_TRUE(near(host(cols), {3, 1, 6, 4}));
  Tensor g = empty({2, 1});
  ops::gather(stream_, x, 1, T({1, 2}, {2, 1}, DType::i64), g);
  EXPECT_TRUE(near(host(g), {2, 6}));
  Tensor y = T({0, 0, 0, 0, 0, 0}, {2, 3});
  ops::scatter_add(stream_, y, 1, T({1, 1, 0, 2}, {2, 2}, DType::i32), T({10, 20, 30, 40}, {2, 2}));
  EXPECT_TRUE(near(host(y), {0, 30, 0, 30, 0, 40}));
}

TEST_F(Values_, UniformAndNormalStayInRangeAndHaveTheirMoments) {
  Tensor u = empty({4096}, DType::f32), n = empty({4096}, DType::f32);
  ops::uniform(stream_, u, -2, 3, {.seed = 7});
  ops::normal(stream_, n, 1, 2, {.seed = 7});
  const Values uv = host(u), nv = host(n);
  double mean_u = 0, mean_n = 0, var_n = 0;
  for (double v : uv) {
    EXPECT_GE(v, -2);
    EXPECT_LT(v, 3);
    mean_u += v / 4096;
  }
  for (double v : nv) mean_n += v / 4096;
  for (double v : nv) var_n += (v - mean_n) * (v - mean_n) / 4095;
  EXPECT_NEAR(mean_u, 0.5, 0.1);  // 4096 draws: the standard error of the mean is 0.023
  EXPECT_NEAR(mean_n, 1, 0.12);
  EXPECT_NEAR(std::sqrt(var_n), 2, 0.1);
}

TEST_F(Values_, DropoutZeroesOrRescalesAndReportsItsMask) {
  Tensor x = T(Values(1000, 1.0), {1000}), y = empty({1000}), mask = empty({1000}, DType::boolean);
  ops::dropout(stream_, x, y, 0.25, {.seed = 3, .offset = 10}, mask);
  const Values yv = host(y), mv = host(mask);
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    EXPECT_EQ(yv[i], mv[i] != 0 ? 1 / 0.75 : 0.0) << i;
    kept += mv[i] != 0;
  }
  EXPECT_NEAR(kept, 750, 60);
  ops::dropout(stream_, x, y, 0.0, {.seed = 3});
  EXPECT_TRUE(near(host(y), Values(1000, 1.0)));
}

}  // namespace
}  // namespace h2::test
