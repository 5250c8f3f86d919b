#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

// `t` broadcast to `shape` (NumPy rules) as a stride-0 view, or an error naming it.
Tensor broadcast_to(const OpCheck& check, const Tensor& t, const char* name, const Shape& shape) {
  bool ok = t.rank() <= static_cast<int>(shape.size());
  for (int i = 1; ok && i <= t.rank(); ++i) {
    const int64_t have = t.shape()[t.shape().size() - static_cast<size_t>(i)];
    ok = have == 1 || have == shape[shape.size() - static_cast<size_t>(i)];
  }
  if (!ok) check.fail(OpCheck::is(name, t) + " does not broadcast to the output shape " + shape_string(shape));
  return t.expand(shape);
}

uint32_t abi_op(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return H2_BINARY_ADD;
    case BinaryOp::sub: return H2_BINARY_SUB;
    case BinaryOp::mul: return H2_BINARY_MUL;
    case BinaryOp::div: return H2_BINARY_DIV;
    case BinaryOp::pow: return H2_BINARY_POW;
    case BinaryOp::maximum: return H2_BINARY_MAXIMUM;
    case BinaryOp::minimum: return H2_BINARY_MINIMUM;
  }
  return 0;
}

uint32_t abi_op(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp: return H2_UNARY_EXP;
    case UnaryOp::log: return H2_UNARY_LOG;
    case UnaryOp::sqrt: return H2_UNARY_SQRT;
    case UnaryOp::rsqrt: return H2_UNARY_RSQRT;
    case UnaryOp::neg: return H2_UNARY_NEG;
    case UnaryOp::reciprocal: return H2_UNARY_RECIPROCAL;
  }
  return 0;
}

void binary_scalar(Stream& stream, BinaryOp op, const Tensor& x, double scalar, bool scalar_first, const Tensor& y) {
  OpCheck check(stream, H2_OP_BINARY_SCALAR);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  const Tensor xb = broadcast_to(check, x, "x", y.shape());
  check.require_same_dtype(x, "x", y, "y");
  auto args = make_args<H2_BinaryScalarArgs>();
  args.op = abi_op(op);
  args.x = xb.descriptor();
  args.y = y.descriptor();
  args.scalar = scalar;
  args.scalar_first = scalar_first;
  check.call(op_slot(check, check.ops().binary_scalar), args);
}

}  // namespace

void binary(Stream& stream, BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& y) {
  OpCheck check(stream, H2_OP_BINARY);
  check.input(a, "a");
  check.input(b, "b");
  check.output(y, "y", TensorKind::floating, false, {"a", "b"});
  const Tensor ab = broadcast_to(check, a, "a", y.shape()), bb = broadcast_to(check, b, "b", y.shape());
  check.require_same_dtype(a, "a", b, "b");
  check.require_same_dtype(a, "a", y, "y");
  auto args = make_args<H2_BinaryArgs>();
  args.op = abi_op(op);
  args.a = ab.descriptor();
  args.b = bb.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().binary), args);
}

void binary(Stream& stream, BinaryOp op, const Tensor& x, double scalar, const Tensor& y) {
  binary_scalar(stream, op, x, scalar, false, y);
}

void binary(Stream& stream, BinaryOp op, double scalar, const Tensor& x, const Tensor& y) {
  binary_scalar(stream, op, x, scalar, true, y);
}

void unary(Stream& stream, UnaryOp op, const Tensor& x, const Tensor& y) {
  OpCheck check(stream, H2_OP_UNARY);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  auto args = make_args<H2_UnaryArgs>();
  args.op = abi_op(op);
  args.x = x.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().unary), args);
}

void where(Stream& stream, const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& y) {
  OpCheck check(stream, H2_OP_WHERE);
  check.input(cond, "cond", TensorKind::mask);
  check.input(a, "a");
  check.input(b, "b");
  check.output(y, "y", TensorKind::floating, false, {"a", "b"});
  const Tensor cb = broadcast_to(check, cond, "cond", y.shape());
  const Tensor ab = broadcast_to(check, a, "a", y.shape()), bb = broadcast_to(check, b, "b", y.shape());
  check.require_same_dtype(a, "a", b, "b");
  check.require_same_dtype(a, "a", y, "y");
  auto args = make_args<H2_WhereArgs>();
  args.cond = cb.descriptor();
  args.a = ab.descriptor();
  args.b = bb.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().where), args);
}

void masked_fill(Stream& stream, const Tensor& x, const Tensor& mask, double value, const Tensor& y) {
  OpCheck check(stream, H2_OP_MASKED_FILL);
  check.input(x, "x");
  check.input(mask, "mask", TensorKind::mask);
  check.output(y, "y", TensorKind::floating, false, {"x"});
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  const Tensor mb = broadcast_to(check, mask, "mask", x.shape());
  auto args = make_args<H2_MaskedFillArgs>();
  args.x = x.descriptor();
  args.mask = mb.descriptor();
  args.y = y.descriptor();
  args.value = value;
  check.call(op_slot(check, check.ops().masked_fill), args);
}

}  // namespace h2::ops
