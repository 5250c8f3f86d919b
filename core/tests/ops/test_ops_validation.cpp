// Each validation error of the operator API: a malformed call never reaches the plugin, and the
// message names the operator and the argument.
#include "ops_test_support.hpp"

namespace h2::test {
namespace {

using testing::HasSubstr;

class Validation : public OpsTest {
 protected:
  // Expects `call` to throw an h2::Error whose message contains `text`, and the stream to stay usable.
  void expect_error(const std::function<void()>& call, const std::string& text,
                    H2_Status status = H2_STATUS_INVALID_ARGUMENT) {
    try {
      call();
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
      EXPECT_EQ(e.status(), status) << e.what();
    }
    stream_.synchronize();
  }
};

// A strided view over a framework's own buffer (DiTorch): the view reads what it names, and one that
// would reach past the buffer is refused naming its shape, strides and offset.
TEST_F(Validation, StridedViewsOfABufferStayInsideIt) {
  const Tensor base = T({0, 1, 2, 3, 4, 5}, {6});
  const Tensor columns = Tensor::from_buffer(base.buffer(), 1, DType::f64, {2, 2}, {3, 1});
  EXPECT_EQ(host(columns), (Values{1, 2, 4, 5}));
  expect_error(
      [&] {
        Tensor::from_buffer(base.buffer(), 2, DType::f64, {2, 2}, {3, 1});
      },
      "[2, 2] of f64 with strides [3, 1] at offset 2 reaches byte 56, the buffer has 48");
}

TEST_F(Validation, GemmInnerDimensionsNamedAsInTheIssue) {
  Tensor c = empty({64, 16}, DType::f32);
  expect_error(
      [&] {
        ops::gemm(stream_, empty({64, 32}, DType::f32), empty({48, 16}, DType::f32), c);
      },
      "gemm: A is [64, 32] but B is [48, 16]: inner dimensions differ");
}

TEST_F(Validation, GemmShapesDtypesAndBatches) {
  expect_error(
      [&] {
        ops::gemm(stream_, empty({2, 3}), empty({3, 4}), empty({2, 5}));
      },
      "gemm: C is [2, 5] but op(A) @ op(B) is [2, 4]");
  expect_error(
      [&] {
        ops::gemm(stream_, empty({2, 3}), empty({3, 4}, DType::f32), empty({2, 4}));
      },
      "gemm: A is f64[2, 3] but B is f32[3, 4]: the dtypes differ");
  expect_error(
      [&] {
        ops::gemm(stream_, empty({2, 3}, DType::bf16), empty({3, 4}, DType::bf16), empty({2, 4}, DType::f16));
      },
      "gemm: C is f16[2, 4] but must have A's dtype (bf16) or f32");
  expect_error(
      [&] {
        ops::gemm(stream_, empty({3, 2, 3}), empty({2, 3, 4}), empty({3, 2, 4}));
      },
      "gemm: B is f64[2, 3, 4] but C has batch 3: batches differ");
  expect_error(
      [&] {
        ops::gemm(stream_, empty({2, 3}), empty({3, 4}), empty({2, 4}), {}, empty({3}));
      },
      "gemm: bias is f64[3] but a bias added to each row of C needs [4]");
  expect_error([&] { ops::gemm(stream_, empty({3}), empty({3, 4}), empty({2, 4})); }, "gemm: A is f64[3]");
}

TEST_F(Validation, UnsupportedDtypeNamesWhatThePluginSupports) {
  expect_error([&] { ops::softmax(stream_, empty({4}, DType::i32), empty({4}, DType::i32)); },
               "softmax: x is i32[4] but plugin cpu-reference supports f32, f16, bf16, f64 for this operator",
               H2_STATUS_UNSUPPORTED);
}

TEST_F(Validation, MissingRequiredTensor) {
  expect_error([&] { ops::softmax(stream_, Tensor(), empty({4})); }, "softmax: x is required but undefined");
}

TEST_F(Validation, ShapeMismatchesNameBothSides) {
  expect_error(
      [&] {
        ops::softmax(stream_, empty({2, 4}), empty({2, 5}));
      },
      "softmax: y is f64[2, 5] but the shape of x needs [2, 4]");
  expect_error(
      [&] {
        ops::layer_norm(stream_, empty({2, 4}), empty({3}), Tensor(), empty({2, 4}), empty({2}, DType::f32),
                        empty({2}, DType::f32));
      },
      "layer_norm: weight is f64[3] but one value per column of x needs [4]");
  expect_error(
      [&] {
        ops::rms_norm(stream_, empty({2, 4}), Tensor(), empty({2, 4}), empty({2}, DType::i32));
      },
      "rms_norm: rstd is i32[2] but statistics are f32 (or f64)");
  expect_error(
      [&] {
        ops::embedding(stream_, empty({10, 4}), empty({3}, DType::f32), empty({3, 4}));
      },
      "embedding: indices is f32[3] but must be i32 or i64");
  expect_error(
      [&] {
        ops::embedding(stream_, empty({10, 4}), empty({3}, DType::i64), empty({3, 5}));
      },
      "embedding: y is f64[3, 5] but indices' shape plus the embedding width needs [3, 4]");
  expect_error(
      [&] {
        ops::rotary(stream_, empty({2, 2, 3}), empty({2, 2, 3}));
      },
      "rotary: x is f64[2, 2, 3] but [..., seq, heads, head_dim] needs an even head_dim");
  expect_error(
      [&] {
        ops::cross_entropy(stream_, empty({3, 5}), empty({4}, DType::i64), empty({3}, DType::f32),
                           empty({3}, DType::f32));
      },
      "cross_entropy: targets is i64[4] but one target per row of logits needs [3]");
  expect_error(
      [&] {
        ops::attention(stream_, empty({1, 3, 2, 4}), empty({1, 2, 2, 4}), empty({1, 2, 2, 4}), empty({1, 3, 2, 4}),
                       empty({1, 3, 2}, DType::f32), 1.0);
      },
      "attention: q is f64[1, 3, 2, 4] but k is f64[1, 2, 2, 4]: query heads must be a multiple of kv heads");
  expect_error([&] { ops::where(stream_, empty({3}, DType::f32), empty({3}), empty({3}), empty({3})); },
               "where: cond is f32[3] but must be bool or u8");
  expect_error(
      [&] {
        ops::add(stream_, empty({2, 3}), empty({4}), empty({2, 3}));
      },
      "binary: b is f64[4] does not broadcast to the output shape [2, 3]");
  expect_error(
      [&] {
        ops::reduce(stream_, ops::ReduceOp::sum, empty({2, 3}), {1}, empty({3}));
      },
      "reduce: y is f64[3] but reducing x over the given dimensions needs [2]");
  expect_error(
      [&] {
        ops::reduce(stream_, ops::ReduceOp::sum, empty({2, 3}), {2}, empty({2}));
      },
      "reduce: dimension 2 is out of range for f64[2, 3]");
  expect_error(
      [&] {
        ops::reduce(stream_, ops::ReduceOp::max, empty({2, 0}), {1}, empty({2}));
      },
      "reduce: the maximum of no elements is undefined");
  expect_error(
      [&] {
        ops::index_select(stream_, empty({2, 3}), 2, empty({1}, DType::i64), empty({2, 1}));
      },
      "index_select: dim 2 is out of range for x is f64[2, 3]");
  expect_error(
      [&] {
        ops::gather(stream_, empty({2, 3}), 1, empty({3, 1}, DType::i64), empty({3, 1}));
      },
      "gather: indices is i64[3, 1] is larger than x is f64[2, 3] in dimension 0");
}

TEST_F(Validation, ScalarsOutOfRange) {
  expect_error([&] { ops::dropout(stream_, empty({4}), empty({4}), 1.0, {}); },
               "dropout: p is 1.000000 but must be in [0, 1)");
  expect_error(
      [&] {
        ops::cross_entropy(stream_, empty({1, 2}), empty({1}, DType::i64), empty({1}), empty({1}),
                           {.label_smoothing = 2});
      },
      "cross_entropy: label_smoothing is 2.000000 but must be in [0, 1]");
  expect_error([&] { ops::uniform(stream_, empty({4}), 2, 1, {}); }, "uniform: low 2.000000 is above high 1.000000");
  Tensor p = empty({2}, DType::f32), s = empty({2}, DType::f32);
  expect_error([&] { ops::adamw(stream_, {p}, {p}, {s}, {s}, {}, {.step = 0}); },
               "adamw: step is 0 but the first step is 1");
}

TEST_F(Validation, TensorListsMustMatch) {
  Tensor p = empty({2}, DType::f32), m = empty({2}, DType::f32), v = empty({2}, DType::f32);
  expect_error([&] { ops::adamw(stream_, {p}, {}, {m}, {v}, {}, {}); }, "adamw: 1 params but 0 grads");
  expect_error([&] { ops::adamw(stream_, {p}, {empty({3}, DType::f32)}, {m}, {v}, {}, {}); },
               "adamw: grads[0] is f32[3] but the shape of params[0] needs [2]");
  expect_error([&] { ops::adamw(stream_, {empty({2}, DType::bf16)}, {empty({2}, DType::bf16)}, {m}, {v}, {}, {}); },
               "adamw: params[0] is bf16[2] but master weights are f32");
  expect_error([&] { ops::grad_norm(stream_, {p}, empty({2}, DType::f32)); },
               "grad_norm: out is f32[2] but must have one element");
}

TEST_F(Validation, OutputsMayNotOverlapInputsUnlessInPlace) {
  Tensor buffer = empty({8});
  expect_error([&] { ops::softmax(stream_, buffer.slice(0, 0, 4), buffer.slice(0, 2, 6)); }, "softmax: y overlaps x");
  expect_error(
      [&] {
        ops::gemm(stream_, buffer.view({2, 4}).slice(1, 0, 2), empty({2, 2}), buffer.view({2, 4}).slice(1, 1, 3));
      },
      "gemm: C overlaps A");
  Tensor x = empty({4});
  ops::softmax(stream_, x, x);  // in place is allowed for softmax
  expect_error([&] { ops::swiglu(stream_, x, empty({4}), x); },
               "swiglu: y is the same memory as gate; this operator cannot write it in place");
  // Column halves of one buffer interleave but do not overlap: allowed.
  Tensor both = empty({3, 8});
  ops::swiglu_backward(stream_, empty({3, 4}), empty({3, 4}), empty({3, 4}), both.slice(1, 0, 4), both.slice(1, 4, 8));
  expect_error(
      [&] {
        ops::swiglu_backward(stream_, empty({3, 4}), empty({3, 4}), empty({3, 4}), both.slice(1, 0, 4),
                             both.slice(1, 3, 7));
      },
      "swiglu_backward: dgate overlaps dup");
}

TEST_F(Validation, OutputsMayNotRepeatElements) {
  Tensor one = empty({1, 4});
  expect_error([&] { ops::fill(stream_, one.expand({3, 4}), 1.0); }, "fill: y has overlapping elements");
}

TEST_F(Validation, ViewsThatCannotExistAreRejected) {
  Tensor x = empty({2, 3});
  EXPECT_THAT(
      [&] {
        x.view({4, 2});
      },
      testing::ThrowsMessage<Error>(HasSubstr("view: f64[2, 3] has 6 elements, [4, 2] has 8")));
  EXPECT_THAT([&] { x.transpose(0, 1).view({6}); }, testing::ThrowsMessage<Error>(HasSubstr("is not contiguous")));
  EXPECT_THAT([&] { x.slice(1, 2, 5); },
              testing::ThrowsMessage<Error>(HasSubstr("slice: [2, 5) is outside dimension 1")));
  EXPECT_THAT([&] { x.expand({4, 3}); }, testing::ThrowsMessage<Error>(HasSubstr("cannot expand to [4, 3]")));
  EXPECT_THAT(
      [&] {
        Tensor::empty(device_, {2, -1}, DType::f32);
      },
      testing::ThrowsMessage<Error>(HasSubstr("negative size")));
}

TEST(ValidationDevices, TensorsMustBeOnTheStreamsDevice) {
  ScopedEnv devices("H2_CPU_REFERENCE_DEVICES", "2");
  Runtime runtime(cpu_reference_only());
  Stream stream = runtime.device("cpu-reference", 0).create_stream();
  Tensor x = Tensor::empty(runtime.device("cpu-reference", 1), {4}, DType::f32);
  Tensor y = Tensor::empty(runtime.device("cpu-reference", 0), {4}, DType::f32);
  EXPECT_THAT([&] { ops::silu(stream, x, y); },
              testing::ThrowsMessage<Error>(
                  HasSubstr("silu: x is f32[4] on cpu-reference:1 but the stream is on cpu-reference:0")));
}

}  // namespace
}  // namespace h2::test
