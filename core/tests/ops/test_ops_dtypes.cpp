// Low-precision dtypes, strided and broadcast inputs, and determinism: rounding to nearest even
// with NaN, infinities, subnormals and overflow; fp32 accumulation for bf16; views instead of
// copies; and bit-identical results whatever the number of threads.
#include <cmath>
#include <limits>

#include "ops_test_support.hpp"

namespace h2::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class Dtypes : public OpsTest {
 protected:
  // `values` stored into `dtype` by the plugin (one rounding from f64), read back exactly.
  Values rounded(const Values& values, DType dtype) {
    Tensor y = empty({static_cast<int64_t>(values.size())}, dtype);
    ops::copy(stream_, T(values, {static_cast<int64_t>(values.size())}), y);
    return host(y);
  }
};

TEST_F(Dtypes, Bf16RoundsToNearestEven) {
  const double u = std::ldexp(1.0, -8);  // half the bf16 spacing at 1
  EXPECT_TRUE(
      near(rounded({1 + u, 1 + 3 * u, 1 + 1.5 * u, -(1 + u)}, DType::bf16), {1, 1 + 4 * u, 1 + 2 * u, -1}, 0, 0));
}

TEST_F(Dtypes, F16RoundsToNearestEvenIncludingSubnormalsAndOverflow) {
  const double tiny = std::ldexp(1.0, -24);  // the smallest f16 subnormal
  EXPECT_TRUE(
      near(rounded({1 + std::ldexp(1.0, -11), 65504, 65519, 65520, tiny, tiny / 2, 1.5 * tiny, 3 * tiny / 2 + tiny},
                   DType::f16),
           {1, 65504, 65504, kInf, tiny, 0, 2 * tiny, 2 * tiny}, 0, 0));
}

TEST_F(Dtypes, SpecialValuesSurviveEveryDtype) {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const Values r = rounded({kInf, -kInf, std::nan(""), -0.0, 1e300}, dtype);
    EXPECT_EQ(r[0], kInf);
    EXPECT_EQ(r[1], -kInf);
    EXPECT_TRUE(std::isnan(r[2]));
    EXPECT_TRUE(r[3] == 0 && std::signbit(r[3])) << "negative zero keeps its sign";
    EXPECT_EQ(r[4], kInf) << "overflow goes to infinity";
  }
  EXPECT_EQ(rounded({3.4e38}, DType::bf16)[0], kInf);  // above bf16's largest finite, past the halfway point
  EXPECT_EQ(rounded({3.389e38}, DType::bf16)[0], 3.3895313892515355e38);  // the largest finite bf16
}

TEST_F(Dtypes, Bf16GemmAccumulatesInAtLeastFp32) {
  // 4096 products of 1: a bf16 accumulator would stall at 256.
  const int64_t k = 4096;
  Tensor a = T(Values(static_cast<size_t>(k), 1.0), {1, k}, DType::bf16);
  Tensor b = T(Values(static_cast<size_t>(k), 1.0), {k, 1}, DType::bf16);
  Tensor c = empty({1, 1}, DType::bf16);
  ops::gemm(stream_, a, b, c);
  EXPECT_EQ(host(c)[0], 4096);
  Tensor sum = empty({}, DType::bf16);
  ops::reduce(stream_, ops::ReduceOp::sum, a, {0, 1}, sum);
  EXPECT_EQ(host(sum)[0], 4096);
}

TEST_F(Dtypes, StridedInputsGiveTheSameResultsAsContiguousCopies) {
  const Values data = random(24, 40);
  Tensor base = T(data, {4, 6});
  Tensor view = base.transpose(0, 1).slice(0, 1, 5);  // [4, 4], strides (1, 6)
  Tensor dense = empty({4, 4});
  ops::copy(stream_, view, dense);
  ASSERT_FALSE(view.is_contiguous());

  Tensor y1 = empty({4, 4}), y2 = empty({4, 4});
  ops::gelu(stream_, view, y1);
  ops::gelu(stream_, dense, y2);
  EXPECT_EQ(host(y1), host(y2));

  Tensor m1 = empty({4}, DType::f32), r1 = empty({4}, DType::f32), m2 = empty({4}, DType::f32),
         r2 = empty({4}, DType::f32);
  ops::layer_norm(stream_, view, Tensor(), Tensor(), y1, m1, r1);
  ops::layer_norm(stream_, dense, Tensor(), Tensor(), y2, m2, r2);
  EXPECT_EQ(host(y1), host(y2));

  ops::gemm(stream_, view, dense, y1);
  ops::gemm(stream_, dense, dense, y2);
  EXPECT_EQ(host(y1), host(y2));

  // A strided output: write into the odd columns of a wider tensor.
  Tensor wide = T(Values(32, -1.0), {4, 8});
  ops::silu(stream_, dense, wide.slice(1, 4, 8));
  Tensor expect = empty({4, 4});
  ops::silu(stream_, dense, expect);
  const Values w = host(wide), e = host(expect);
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 8; ++c)
      EXPECT_EQ(w[static_cast<size_t>(r * 8 + c)], c < 4 ? -1.0 : e[static_cast<size_t>(r * 4 + c - 4)]);
}

TEST_F(Dtypes, BroadcastInputsAreStrideZeroViews) {
  Tensor row = T({1, 2, 3}, {3}), col = T({10, 20}, {2, 1}), y = empty({2, 3});
  ops::mul(stream_, row, col, y);
  EXPECT_TRUE(near(host(y), {10, 20, 30, 20, 40, 60}));
  Tensor bias_added = empty({2, 3});
  ops::where(stream_, T({1}, {1}, DType::boolean), row, col, bias_added);
  EXPECT_TRUE(near(host(bias_added), {1, 2, 3, 1, 2, 3}));
}

TEST_F(Dtypes, InputsAreNotModified) {
  const Values x = random(12, 41), w = random(4, 42);
  Tensor tx = T(x, {3, 4}), tw = T(w, {4});
  Tensor y = empty({3, 4}), rstd = empty({3}, DType::f32);
  ops::rms_norm(stream_, tx, tw, y, rstd);
  Tensor c = empty({3, 3});
  ops::gemm(stream_, tx, tx, c, {.transpose_b = true});
  EXPECT_EQ(host(tx), x);
  EXPECT_EQ(host(tw), w);
}

// Runs a small training-like sequence of operators and returns every output's bits.
Values run_sequence(int threads) {
  ScopedEnv env("H2_CPU_REFERENCE_THREADS", std::to_string(threads));
  Runtime runtime(cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  auto make = [&](Shape shape, uint64_t seed) {
    Tensor t = Tensor::empty(device, std::move(shape), DType::f32);
    ops::normal(stream, t, 0, 1, {.seed = seed});
    return t;
  };
  Tensor q = make({2, 4, 33, 16}, 1), k = make({2, 2, 33, 16}, 2), v = make({2, 2, 33, 16}, 3),
         g = make({2, 4, 33, 16}, 4);
  Tensor o = Tensor::empty(device, {2, 4, 33, 16}, DType::f32), lse = Tensor::empty(device, {2, 4, 33}, DType::f32);
  Tensor dq = Tensor::empty(device, q.shape(), DType::f32), dk = Tensor::empty(device, k.shape(), DType::f32),
         dv = Tensor::empty(device, v.shape(), DType::f32);
  ops::attention(stream, q, k, v, o, lse, 0.25, true);
  ops::attention_backward(stream, q, k, v, o, lse, g, dq, dk, dv, 0.25, true);
  Tensor a = make({97, 61}, 5), b = make({61, 83}, 6), c = Tensor::empty(device, {97, 83}, DType::f32);
  ops::gemm(stream, a, b, c);
  Tensor norm = Tensor::empty(device, {1}, DType::f32);
  ops::grad_norm(stream, {dq, dk, dv, c}, norm);
  Values all;
  for (const Tensor& t : {o, lse, dq, dk, dv, c, norm}) {
    Values h = t.to_host(stream);
    all.insert(all.end(), h.begin(), h.end());
  }
  return all;
}

TEST(Determinism, ResultsAreBitIdenticalForAnyThreadCount) {
  const Values one = run_sequence(1), two = run_sequence(2), five = run_sequence(5);
  ASSERT_EQ(one.size(), two.size());
  EXPECT_TRUE(one == two) << "1 vs 2 threads";
  EXPECT_TRUE(one == five) << "1 vs 5 threads";
  EXPECT_TRUE(one == run_sequence(2)) << "two runs";
}

}  // namespace
}  // namespace h2::test
