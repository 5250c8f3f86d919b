// Comparisons (eq, ne, lt, le, gt, ge against a tensor or a scalar), logical and/or/not, isnan and
// sign/sgn, which autograd's formulas for maximum, clamp, pow, abs and the reductions use. The plugin
// ABI has no comparison operator, so each is composed from its arithmetic in f32, exactly:
//   d = clamp(a) - clamp(b), with infinities clamped to the largest finite f32 so that inf - inf is 0;
//   copying a float to BOOL gives x != 0 (NaN included), so "d != 0" is one copy;
//   d > 0 is (max(d, 0) != 0) and not NaN, where NaN is (d - d != 0).
// (The one inexact case: an infinity compares equal to the largest finite f32.)
#include <ATen/ExpandUtils.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace h2torch {
namespace {

using h2::ops::BinaryOp;

enum class Compare { eq, ne, lt, le, gt, ge };

h2::Tensor indicator(h2::Stream& s, const h2::Tensor& x) {  // 1 where x != 0 (or NaN), else 0, in f32
  const h2::Tensor flag = h2::Tensor::empty(s, x.shape(), h2::DType::boolean),
                   result = h2::Tensor::empty(s, x.shape(), h2::DType::f32);
  h2::ops::copy(s, x, flag);
  h2::ops::copy(s, flag, result);
  return result;
}

h2::Tensor finite_clamped(h2::Stream& s, const h2::Tensor& x) {
  constexpr double kMax = std::numeric_limits<float>::max();
  const h2::Tensor y = h2::Tensor::empty(s, x.shape(), h2::DType::f32);
  h2::ops::binary(s, BinaryOp::minimum, x, kMax, y);
  h2::ops::binary(s, BinaryOp::maximum, y, -kMax, y);
  return y;
}

// 1 where x > 0 (not NaN), else 0.
h2::Tensor positive(h2::Stream& s, const h2::Tensor& x, const h2::Tensor& not_nan) {
  const h2::Tensor clipped = h2::Tensor::empty(s, x.shape(), h2::DType::f32);
  h2::ops::binary(s, BinaryOp::maximum, x, 0.0, clipped);
  const h2::Tensor result = indicator(s, clipped);
  h2::ops::mul(s, result, not_nan, result);
  return result;
}

// 1 where x is not NaN (x finite after clamping), else 0.
h2::Tensor not_nan(h2::Stream& s, const h2::Tensor& x) {
  const h2::Tensor zero_or_nan = h2::Tensor::empty(s, x.shape(), h2::DType::f32);
  h2::ops::sub(s, x, x, zero_or_nan);
  const h2::Tensor result = indicator(s, zero_or_nan);
  h2::ops::binary(s, BinaryOp::sub, 1.0, result, result);
  return result;
}

// The f32 indicator of `compare` on d = a - b (a and b clamped to finite values).
h2::Tensor compare_difference(h2::Stream& s, Compare compare, const h2::Tensor& d) {
  const h2::Tensor valid = not_nan(s, d);
  h2::Tensor result = indicator(s, d);  // ne
  if (compare == Compare::ne) return result;
  h2::ops::binary(s, BinaryOp::sub, 1.0, result, result);  // eq (NaN: 0)
  if (compare == Compare::eq) return result;
  const h2::Tensor equal = result;
  h2::Tensor strict;
  if (compare == Compare::gt || compare == Compare::ge) {
    strict = positive(s, d, valid);
  } else {
    const h2::Tensor negated = h2::Tensor::empty(s, d.shape(), h2::DType::f32);
    h2::ops::unary(s, h2::ops::UnaryOp::neg, d, negated);
    strict = positive(s, negated, valid);
  }
  if (compare == Compare::ge || compare == Compare::le) h2::ops::add(s, strict, equal, strict);
  return strict;
}

at::Tensor& compare_into(const char* name, Compare compare, const at::Tensor& self, const at::Tensor& other,
                         at::Tensor& out) {
  const std::vector<int64_t> shape = broadcast_out(name, {&self, &other}, out);
  const int index = out.device().index();
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor d = h2::Tensor::empty(s, shape_of(shape), h2::DType::f32);
  // A CPU 0-dim operand is a scalar: clamped on the host.
  const auto scalar = [](const at::Tensor& t) {
    constexpr double kMax = std::numeric_limits<float>::max();
    const double v = t.item().toDouble();
    return std::isnan(v) ? v : std::clamp(v, -kMax, kMax);
  };
  if (other.device().is_cpu())
    h2::ops::binary(s, BinaryOp::sub, finite_clamped(s, operand(self, at::kFloat, shape)), scalar(other), d);
  else if (self.device().is_cpu())
    h2::ops::binary(s, BinaryOp::sub, scalar(self), finite_clamped(s, operand(other, at::kFloat, shape)), d);
  else
    h2::ops::sub(s, finite_clamped(s, operand(self, at::kFloat, shape)),
                 finite_clamped(s, operand(other, at::kFloat, shape)), d);
  h2::ops::copy(s, compare_difference(s, compare, d), as_h2(out));
  return out;
}

at::Tensor bool_result(const at::Tensor& self) {
  return at::empty({0}, self.options().dtype(at::kBool));
}

#define H2_COMPARE(fn, KIND)                                                                       \
  at::Tensor& fn##_tensor_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {  \
    return compare_into(#fn, KIND, self, other, out);                                              \
  }                                                                                                \
  at::Tensor fn##_tensor(const at::Tensor& self, const at::Tensor& other) {                        \
    at::Tensor out = bool_result(self);                                                            \
    return compare_into(#fn, KIND, self, other, out);                                              \
  }                                                                                                \
  at::Tensor& fn##_scalar_out(const at::Tensor& self, const c10::Scalar& other, at::Tensor& out) { \
    return compare_into(#fn, KIND, self, wrapped(other), out);                                     \
  }                                                                                                \
  at::Tensor fn##_scalar(const at::Tensor& self, const c10::Scalar& other) {                       \
    at::Tensor out = bool_result(self);                                                            \
    return compare_into(#fn, KIND, self, wrapped(other), out);                                     \
  }
H2_COMPARE(eq, Compare::eq)
H2_COMPARE(ne, Compare::ne)
H2_COMPARE(lt, Compare::lt)
H2_COMPARE(le, Compare::le)
H2_COMPARE(gt, Compare::gt)
H2_COMPARE(ge, Compare::ge)

at::Tensor isnan(const at::Tensor& self) {
  const int index = one_device("isnan", {&self});
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));
  if (out.numel() == 0) return out;
  if (!c10::isFloatingType(self.scalar_type())) return out.fill_(false);
  h2::Stream& s = stream(index);
  const h2::Tensor valid = not_nan(s, finite_clamped(s, operand(self, at::kFloat)));
  h2::ops::binary(s, BinaryOp::sub, 1.0, valid, valid);
  h2::ops::copy(s, valid, as_h2(out));
  return out;
}

// sign(x): 1, 0 or -1 (NaN gives 0).
at::Tensor& sign_out(const at::Tensor& self, at::Tensor& out) {
  const int index = one_device("sign", {&self, &out});
  check_floating("sign", self);
  const c10::DeviceGuard guard(h2_device(index));
  resize_out(out, self.sizes());
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor x = finite_clamped(s, operand(self, at::kFloat)), valid = not_nan(s, x);
  const h2::Tensor negated = h2::Tensor::empty(s, x.shape(), h2::DType::f32);
  h2::ops::unary(s, h2::ops::UnaryOp::neg, x, negated);
  const h2::Tensor up = positive(s, x, valid), down = positive(s, negated, valid);
  h2::ops::sub(s, up, down, up);
  h2::ops::copy(s, up, as_h2(out));
  return out;
}
at::Tensor sign(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options());
  return h2torch::sign_out(self, out);
}

// ---- logical operators on truth values (x != 0) ----

enum class Logical { both, either };

at::Tensor& logical_into(const char* name, Logical op, const at::Tensor& self, const at::Tensor& other,
                         at::Tensor& out) {
  const std::vector<int64_t> shape = broadcast_out(name, {&self, &other}, out);
  const int index = out.device().index();
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor a = indicator(s, operand(self, at::kFloat, shape)),
                   b = indicator(s, operand(other, at::kFloat, shape));
  if (op == Logical::both)
    h2::ops::mul(s, a, b, a);
  else
    h2::ops::add(s, a, b, a);
  h2::ops::copy(s, a, as_h2(out));
  return out;
}
at::Tensor& logical_and_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return logical_into("logical_and", Logical::both, self, other, out);
}
at::Tensor& logical_or_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return logical_into("logical_or", Logical::either, self, other, out);
}

at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  const int index = one_device("logical_not", {&self, &out});
  const c10::DeviceGuard guard(h2_device(index));
  resize_out(out, self.sizes());
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor truth = indicator(s, operand(self, at::kFloat));
  h2::ops::binary(s, BinaryOp::sub, 1.0, truth, truth);
  h2::ops::copy(s, truth, as_h2(out));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define H2_REGISTER_COMPARE(fn)                   \
  H2_IMPL(m, #fn ".Tensor", fn##_tensor);         \
  H2_IMPL(m, #fn ".Tensor_out", fn##_tensor_out); \
  H2_IMPL(m, #fn ".Scalar", fn##_scalar);         \
  H2_IMPL(m, #fn ".Scalar_out", fn##_scalar_out)
  H2_REGISTER_COMPARE(eq);
  H2_REGISTER_COMPARE(ne);
  H2_REGISTER_COMPARE(lt);
  H2_REGISTER_COMPARE(le);
  H2_REGISTER_COMPARE(gt);
  H2_REGISTER_COMPARE(ge);
#undef H2_REGISTER_COMPARE
  H2_IMPL(m, "logical_and.out", logical_and_out);
  H2_IMPL(m, "logical_or.out", logical_or_out);
  H2_IMPL(m, "logical_not.out", logical_not_out);
  H2_IMPL(m, "isnan", isnan);
  H2_IMPL(m, "sign", sign);
  H2_IMPL(m, "sign.out", sign_out);
  H2_IMPL(m, "sgn", sign);
  H2_IMPL(m, "sgn.out", sign_out);
}

}  // namespace h2torch
