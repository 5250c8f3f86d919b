// Elementwise aten operators on h2::ops: add, sub, mul, div (broadcasting, alpha, a CPU 0-dim operand
// taken as a scalar, LibTorch's type promotion), pow, maximum, minimum, clamp, the unary family,
// addcmul and addcdiv (AdamW's updates), where and masked_fill. Each is registered in its functional,
// in-place and out= forms, all computed by one `*_into` function writing into `out`. H2's operators
// compute in floating point: integer arithmetic runs on the CPU and is counted as a fallback.
#include <ATen/ExpandUtils.h>

#include "kernels.hpp"

namespace h2torch {
namespace {

using h2::ops::BinaryOp;
using h2::ops::UnaryOp;

// A CPU 0-dim tensor is a scalar operand (LibTorch's wrapped numbers, `x * 2.0`).
bool is_scalar(const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0;
}

at::Tensor binary_on_cpu(BinaryOp op, const at::Tensor& a, const at::Tensor& b, const c10::Scalar& alpha) {
  switch (op) {
    case BinaryOp::add: return at::add(a, b, alpha);
    case BinaryOp::sub: return at::sub(a, b, alpha);
    case BinaryOp::mul: return at::mul(a, b);
    case BinaryOp::div: return at::div(a, b);
    case BinaryOp::pow: return at::pow(a, b);
    case BinaryOp::maximum: return at::maximum(a, b);
    case BinaryOp::minimum: return at::minimum(a, b);
  }
  return {};
}

// out = self op (alpha * other), in out's dtype.
at::Tensor& binary_into(const char* name, BinaryOp op, const at::Tensor& self, const at::Tensor& other,
                        const c10::Scalar& alpha, at::Tensor& out) {
  const std::vector<int64_t> shape = broadcast_out(name, {&self, &other}, out);
  const int index = out.device().index();
  const c10::ScalarType type = out.scalar_type();
  if (c10::isIntegralType(type, true)) {
    note_fallback(std::string("aten::") + name + " (" + c10::toString(type) + ")");
    out.copy_(binary_on_cpu(op, self.cpu(), other.cpu(), alpha));
    return out;
  }
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor y = as_h2(out);
  const double factor = alpha.toDouble();
  if (is_scalar(other)) {
    h2::ops::binary(s, op, operand(self, type, shape), other.item().toDouble() * factor, y);
    return out;
  }
  h2::Tensor b = operand(other, type, shape);
  if (factor != 1) {  // alpha scales `other` whichever side is a scalar
    h2::Tensor scaled = h2::Tensor::empty(s, b.shape(), y.dtype());
    h2::ops::binary(s, BinaryOp::mul, b, factor, scaled);
    b = scaled;
  }
  if (is_scalar(self))
    h2::ops::binary(s, op, self.item().toDouble(), b, y);
  else
    h2::ops::binary(s, op, operand(self, type, shape), b, y);
  return out;
}

// The functional form's result: on the operands' device, of their broadcast shape, in LibTorch's
// promoted dtype (integer division and integer roots give the default float dtype).
at::Tensor result_for(const char* name, const at::Tensor& self, const at::Tensor& other, bool floating) {
  const int index = one_device(name, {&self, &other});
  c10::ScalarType type = other.defined() ? at::result_type(self, other) : self.scalar_type();
  if (floating && c10::isIntegralType(type, true)) type = c10::get_default_dtype_as_scalartype();
  const c10::DimVector shape =
      other.defined() ? at::infer_size_dimvector(self.sizes(), other.sizes()) : c10::DimVector(self.sizes());
  return at::empty(shape, self.options().dtype(type).device(h2_device(index)));
}

#define H2_BINARY_WITH_ALPHA(fn, OP)                                                                                 \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out) { \
    return binary_into(#fn, OP, self, other, alpha, out);                                                            \
  }                                                                                                                  \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {                         \
    at::Tensor out = result_for(#fn, self, other, false);                                                            \
    return h2torch::fn##_out(self, other, alpha, out);                                                               \
  }                                                                                                                  \
  at::Tensor& fn##_inplace(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {                    \
    return h2torch::fn##_out(self, other, alpha, self);                                                              \
  }
H2_BINARY_WITH_ALPHA(add, BinaryOp::add)
H2_BINARY_WITH_ALPHA(sub, BinaryOp::sub)

#define H2_BINARY(fn, OP, FLOATING)                                                        \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) { \
    return binary_into(#fn, OP, self, other, 1, out);                                      \
  }                                                                                        \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& other) {                         \
    at::Tensor out = result_for(#fn, self, other, FLOATING);                               \
    return h2torch::fn##_out(self, other, out);                                            \
  }                                                                                        \
  at::Tensor& fn##_inplace(at::Tensor& self, const at::Tensor& other) {                    \
    return h2torch::fn##_out(self, other, self);                                           \
  }
H2_BINARY(mul, BinaryOp::mul, false)
H2_BINARY(div, BinaryOp::div, true)
H2_BINARY(maximum, BinaryOp::maximum, false)
H2_BINARY(minimum, BinaryOp::minimum, false)
H2_BINARY(pow_tensor, BinaryOp::pow, false)

at::Tensor& pow_scalar_out(const at::Tensor& self, const c10::Scalar& exponent, at::Tensor& out) {
  return binary_into("pow", BinaryOp::pow, self, wrapped(exponent), 1, out);
}
at::Tensor pow_scalar(const at::Tensor& self, const c10::Scalar& exponent) {
  at::Tensor out = result_for("pow", self, wrapped(exponent), false);
  return h2torch::pow_scalar_out(self, exponent, out);
}
at::Tensor& pow_scalar_inplace(at::Tensor& self, const c10::Scalar& exponent) {
  return h2torch::pow_scalar_out(self, exponent, self);
}

// clamp(x, min, max) = minimum(maximum(x, min), max), either bound optional.
at::Tensor& clamp_out(const at::Tensor& self, const c10::optional<c10::Scalar>& min,
                      const c10::optional<c10::Scalar>& max, at::Tensor& out) {
  TORCH_CHECK(min || max, "clamp: at least one of 'min' or 'max' must not be None");
  const at::Tensor* source = &self;
  if (min) source = &binary_into("clamp", BinaryOp::maximum, *source, wrapped(*min), 1, out);
  if (max) binary_into("clamp", BinaryOp::minimum, *source, wrapped(*max), 1, out);
  return out;
}
at::Tensor clamp(const at::Tensor& self, const c10::optional<c10::Scalar>& min, const c10::optional<c10::Scalar>& max) {
  at::Tensor out = result_for("clamp", self, {}, false);
  return h2torch::clamp_out(self, min, max, out);
}
at::Tensor& clamp_inplace(at::Tensor& self, const c10::optional<c10::Scalar>& min,
                          const c10::optional<c10::Scalar>& max) {
  return h2torch::clamp_out(self, min, max, self);
}

// ---- unary ----

at::Tensor unary_on_cpu(UnaryOp op, const at::Tensor& x) {
  switch (op) {
    case UnaryOp::exp: return at::exp(x);
    case UnaryOp::log: return at::log(x);
    case UnaryOp::sqrt: return at::sqrt(x);
    case UnaryOp::rsqrt: return at::rsqrt(x);
    case UnaryOp::neg: return at::neg(x);
    case UnaryOp::reciprocal: return at::reciprocal(x);
  }
  return {};
}

at::Tensor& unary_into(const char* name, UnaryOp op, const at::Tensor& self, at::Tensor& out) {
  const int index = one_device(name, {&self, &out});
  const c10::DeviceGuard guard(h2_device(index));
  resize_out(out, self.sizes());
  if (c10::isIntegralType(out.scalar_type(), true)) {
    note_fallback(std::string("aten::") + name + " (" + c10::toString(out.scalar_type()) + ")");
    out.copy_(unary_on_cpu(op, self.cpu()));
    return out;
  }
  if (out.numel() > 0) h2::ops::unary(stream(index), op, operand(self, out.scalar_type()), as_h2(out));
  return out;
}

#define H2_UNARY(fn, OP, FLOATING)                                \
  at::Tensor& fn##_out(const at::Tensor& self, at::Tensor& out) { \
    return unary_into(#fn, OP, self, out);                        \
  }                                                               \
  at::Tensor fn(const at::Tensor& self) {                         \
    at::Tensor out = result_for(#fn, self, {}, FLOATING);         \
    return h2torch::fn##_out(self, out);                          \
  }                                                               \
  at::Tensor& fn##_inplace(at::Tensor& self) {                    \
    return h2torch::fn##_out(self, self);                         \
  }
H2_UNARY(exp, UnaryOp::exp, true)
H2_UNARY(log, UnaryOp::log, true)
H2_UNARY(sqrt, UnaryOp::sqrt, true)
H2_UNARY(rsqrt, UnaryOp::rsqrt, true)
H2_UNARY(neg, UnaryOp::neg, false)
H2_UNARY(reciprocal, UnaryOp::reciprocal, true)

// |x| = max(x, -x).
at::Tensor& abs_out(const at::Tensor& self, at::Tensor& out) {
  const at::Tensor negated = h2torch::neg(self);
  return binary_into("abs", BinaryOp::maximum, self, negated, 1, out);
}
at::Tensor abs(const at::Tensor& self) {
  at::Tensor out = result_for("abs", self, {}, false);
  return h2torch::abs_out(self, out);
}
at::Tensor& abs_inplace(at::Tensor& self) {
  return h2torch::abs_out(self, self);
}

// ---- AdamW's fused updates: self + value * (t1 * t2) and self + value * (t1 / t2) ----

at::Tensor& combine_into(const char* name, BinaryOp op, const at::Tensor& self, const at::Tensor& t1,
                         const at::Tensor& t2, const c10::Scalar& value, at::Tensor& out) {
  const std::vector<int64_t> shape = broadcast_out(name, {&self, &t1, &t2}, out);
  const int index = out.device().index();
  check_floating(name, out);
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const c10::ScalarType type = out.scalar_type();
  h2::Tensor product = h2::Tensor::empty(s, shape_of(shape), h2_dtype(type));
  h2::ops::binary(s, op, operand(t1, type, shape), operand(t2, type, shape), product);
  h2::ops::binary(s, BinaryOp::mul, product, value.toDouble(), product);
  h2::ops::add(s, operand(self, type, shape), product, as_h2(out));
  return out;
}

#define H2_COMBINE(fn, OP)                                                                                           \
  at::Tensor& fn##_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value, \
                       at::Tensor& out) {                                                                            \
    return combine_into(#fn, OP, self, t1, t2, value, out);                                                          \
  }                                                                                                                  \
  at::Tensor fn(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) {      \
    at::Tensor out = result_for(#fn, self, t1, false);                                                               \
    return h2torch::fn##_out(self, t1, t2, value, out);                                                              \
  }                                                                                                                  \
  at::Tensor& fn##_inplace(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) { \
    return h2torch::fn##_out(self, t1, t2, value, self);                                                             \
  }
H2_COMBINE(addcmul, BinaryOp::mul)
H2_COMBINE(addcdiv, BinaryOp::div)

// ---- selection ----

at::Tensor& where_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  const std::vector<int64_t> shape = broadcast_out("where", {&condition, &self, &other}, out);
  const int index = out.device().index();
  if (out.numel() == 0) return out;
  const c10::ScalarType type = out.scalar_type();
  const at::Tensor a = is_scalar(self) ? at::full({}, self.item(), out.options()) : self;
  const at::Tensor b = is_scalar(other) ? at::full({}, other.item(), out.options()) : other;
  h2::ops::where(stream(index), operand(condition, at::kBool, shape), operand(a, type, shape), operand(b, type, shape),
                 as_h2(out));
  return out;
}
at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out = result_for("where", self, other, false);
  return h2torch::where_out(condition, self, other, out);
}

at::Tensor& masked_fill_scalar(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  const int index = one_device("masked_fill_", {&self, &mask});
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  at::infer_size(self.sizes(), mask.sizes());  // names the shapes when they do not broadcast
  if (c10::isIntegralType(self.scalar_type(), true)) {
    note_fallback(std::string("aten::masked_fill_ (") + c10::toString(self.scalar_type()) + ")");
    self.copy_(self.cpu().masked_fill_(mask.cpu(), value));
    return self;
  }
  if (self.numel() > 0)
    h2::ops::masked_fill(stream(index), as_h2(self), operand(mask, at::kBool, self.sizes()), value.toDouble(),
                         as_h2(self));
  return self;
}
at::Tensor& masked_fill_tensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_scalar(self, mask, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  H2_IMPL(m, "add.Tensor", add);
  H2_IMPL(m, "add_.Tensor", add_inplace);
  H2_IMPL(m, "add.out", add_out);
  H2_IMPL(m, "sub.Tensor", sub);
  H2_IMPL(m, "sub_.Tensor", sub_inplace);
  H2_IMPL(m, "sub.out", sub_out);
  H2_IMPL(m, "mul.Tensor", mul);
  H2_IMPL(m, "mul_.Tensor", mul_inplace);
  H2_IMPL(m, "mul.out", mul_out);
  H2_IMPL(m, "div.Tensor", div);
  H2_IMPL(m, "div_.Tensor", div_inplace);
  H2_IMPL(m, "div.out", div_out);
  H2_IMPL(m, "maximum", maximum);
  H2_IMPL(m, "maximum.out", maximum_out);
  H2_IMPL(m, "minimum", minimum);
  H2_IMPL(m, "minimum.out", minimum_out);
  H2_IMPL(m, "pow.Tensor_Tensor", pow_tensor);
  H2_IMPL(m, "pow_.Tensor", pow_tensor_inplace);
  H2_IMPL(m, "pow.Tensor_Tensor_out", pow_tensor_out);
  H2_IMPL(m, "pow.Tensor_Scalar", pow_scalar);
  H2_IMPL(m, "pow_.Scalar", pow_scalar_inplace);
  H2_IMPL(m, "pow.Tensor_Scalar_out", pow_scalar_out);
  H2_IMPL(m, "clamp", clamp);
  H2_IMPL(m, "clamp_", clamp_inplace);
  H2_IMPL(m, "clamp.out", clamp_out);
#define H2_REGISTER_UNARY(name)          \
  H2_IMPL(m, #name, name);               \
  H2_IMPL(m, #name "_", name##_inplace); \
  H2_IMPL(m, #name ".out", name##_out)
  H2_REGISTER_UNARY(exp);
  H2_REGISTER_UNARY(log);
  H2_REGISTER_UNARY(sqrt);
  H2_REGISTER_UNARY(rsqrt);
  H2_REGISTER_UNARY(neg);
  H2_REGISTER_UNARY(reciprocal);
  H2_REGISTER_UNARY(abs);
  H2_REGISTER_UNARY(addcmul);
  H2_REGISTER_UNARY(addcdiv);
#undef H2_REGISTER_UNARY
  H2_IMPL(m, "where.self", where);
  H2_IMPL(m, "where.self_out", where_out);
  H2_IMPL(m, "masked_fill_.Scalar", masked_fill_scalar);
  H2_IMPL(m, "masked_fill_.Tensor", masked_fill_tensor);
}

}  // namespace h2torch
