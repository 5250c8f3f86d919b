#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

Shape with_last(Shape shape, int64_t last) {
  shape.push_back(last);
  return shape;
}

void rotate(Stream& stream, const Tensor& x, const Tensor& y, const RotaryOptions& options, bool inverse,
            const char* name) {
  OpCheck check(stream, H2_OP_ROTARY, name);
  check.input(x, inverse ? "dy" : "x");
  check.output(y, inverse ? "dx" : "y", TensorKind::floating, false, {inverse ? "dy" : "x"});
  check.require_rank_at_least(x, inverse ? "dy" : "x", 3);
  if (!(x.size(-1) % 2 == 0))
    check.fail(OpCheck::is(inverse ? "dy" : "x", x) + " but [..., seq, heads, head_dim] needs an even head_dim");
  check.require_shape(y, inverse ? "dx" : "y", x.shape(), "the input's shape");
  check.require_same_dtype(x, inverse ? "dy" : "x", y, inverse ? "dx" : "y");
  if (!(options.base > 0)) check.fail("base is " + std::to_string(options.base) + " but must be positive");
  auto args = make_args<H2_RotaryArgs>();
  args.x = x.descriptor();
  args.y = y.descriptor();
  args.base = options.base;
  args.position_offset = options.position_offset;
  args.interleaved = options.interleaved;
  args.inverse = inverse;
  check.call(op_slot(check, check.ops().rotary), args);
}

}  // namespace

void embedding(Stream& stream, const Tensor& weight, const Tensor& indices, const Tensor& y) {
  OpCheck check(stream, H2_OP_EMBEDDING);
  check.input(weight, "weight");
  check.input(indices, "indices", TensorKind::index);
  check.output(y, "y");
  check.require_rank(weight, "weight", 2);
  check.require_shape(y, "y", with_last(indices.shape(), weight.size(1)), "indices' shape plus the embedding width");
  check.require_same_dtype(weight, "weight", y, "y");
  auto args = make_args<H2_EmbeddingArgs>();
  args.weight = weight.descriptor();
  args.indices = indices.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().embedding), args);
}

void embedding_backward(Stream& stream, const Tensor& indices, const Tensor& dy, const Tensor& dweight) {
  OpCheck check(stream, H2_OP_EMBEDDING_BACKWARD);
  check.input(indices, "indices", TensorKind::index);
  check.input(dy, "dy");
  check.output(dweight, "dweight");
  check.require_rank(dweight, "dweight", 2);
  check.require_shape(dy, "dy", with_last(indices.shape(), dweight.size(1)), "indices' shape plus the embedding width");
  auto args = make_args<H2_EmbeddingBackwardArgs>();
  args.indices = indices.descriptor();
  args.dy = dy.descriptor();
  args.dweight = dweight.descriptor();
  check.call(op_slot(check, check.ops().embedding_backward), args);
}

void rotary(Stream& stream, const Tensor& x, const Tensor& y, const RotaryOptions& options) {
  rotate(stream, x, y, options, false, "rotary");
}

void rotary_backward(Stream& stream, const Tensor& dy, const Tensor& dx, const RotaryOptions& options) {
  rotate(stream, dy, dx, options, true, "rotary_backward");
}

}  // namespace h2::ops
