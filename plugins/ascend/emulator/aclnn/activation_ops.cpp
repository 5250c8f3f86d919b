// Emulated aclnn activations: GeluV2 (erf or tanh), GeluBackwardV2, Silu and SiluBackward, in FP32.
#include <cmath>
#include <cstring>
#include <utility>

#include "elementwise.hpp"
#include "emulated_op.hpp"

using namespace ascend_emulator;

namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kInvSqrt2 = 0.7071067811865476;
constexpr double kInvSqrt2Pi = 0.3989422804014327;

// The normal CDF of x in T's arithmetic: erfc(-x / sqrt(2)) / 2, with the rounding error of the
// argument corrected to first order (erfc amplifies it about 2 z^2 times in the tail, where GELU's
// small negative values live).
template <typename T>
T normal_cdf(T x) {
  const T c_hi = static_cast<T>(kInvSqrt2);
  const T c_lo = static_cast<T>(kInvSqrt2 - static_cast<double>(c_hi));
  const T z = -x * c_hi;
  if (!std::isfinite(z)) return static_cast<T>(0.5) * std::erfc(z);
  const T error = std::fma(-x, c_hi, -z) + -x * c_lo;
  const T slope = static_cast<T>(1.1283791670955126) * std::exp(-z * z);  // -d erfc / dz
  return static_cast<T>(0.5) * (std::erfc(z) - error * slope);
}

template <typename T>
T gelu(T x, bool tanh_form) {
  if (tanh_form) {
    // (1 + tanh(u)) / 2 as 1 / (1 + exp(v)), v = -2u: no cancellation for negative u. v is carried
    // as hi + lo (error-free products and sums with fma), because exp turns v's absolute error into
    // the result's relative error, and in GELU's tail |v| reaches tens.
    if (std::isinf(x)) return x > 0 ? x : static_cast<T>(0);
    const auto split = [](double c) { return std::pair{static_cast<T>(c), static_cast<T>(c - static_cast<T>(c))}; };
    const auto [a_hi, a_lo] = split(0.044715);
    const auto [k_hi, k_lo] = split(-2 * kSqrt2OverPi);
    const T x2 = x * x, x2_lo = std::fma(x, x, -x2);
    const T x3 = x2 * x, x3_lo = std::fma(x2, x, -x3) + x2_lo * x;
    const T p = a_hi * x3, p_lo = std::fma(a_hi, x3, -p) + a_hi * x3_lo + a_lo * x3;
    const T sum = x + p, b = sum - x, sum_lo = (x - (sum - b)) + (p - b) + p_lo;
    const T v = k_hi * sum, v_lo = std::fma(k_hi, sum, -v) + k_hi * sum_lo + k_lo * sum;
    if (v > 0) {
      // x e^-v / (1 + e^-v): exp(v) would overflow where gelu(x) is still a normal number.
      const T e = std::exp(-v) * (static_cast<T>(1) - v_lo);
      return x * e / (static_cast<T>(1) + e);
    }
    const T e = std::exp(v);
    return x / (static_cast<T>(1) + e + e * v_lo);
  }
  // erfc, not 1 + erf: for very negative x the sum cancels to 0 in FP32 while gelu(x) is not.
  return x * normal_cdf(x);
}

template <typename T>
T gelu_derivative(T x, bool tanh_form) {
  if (tanh_form) {
    const T inner = static_cast<T>(kSqrt2OverPi) * (x + static_cast<T>(0.044715) * x * x * x);
    const T t = std::tanh(inner);
    const T d_inner = static_cast<T>(kSqrt2OverPi) * (static_cast<T>(1) + static_cast<T>(3 * 0.044715) * x * x);
    return static_cast<T>(0.5) * (static_cast<T>(1) + t) +
           static_cast<T>(0.5) * x * (static_cast<T>(1) - t * t) * d_inner;
  }
  const T cdf = normal_cdf(x);
  const T pdf = static_cast<T>(kInvSqrt2Pi) * std::exp(static_cast<T>(-0.5) * x * x);
  return cdf + x * pdf;
}

template <typename T>
T sigmoid(T x) {
  return static_cast<T>(1) / (static_cast<T>(1) + std::exp(-x));
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnGeluV2GetWorkspaceSize(const aclTensor* x, int64_t approximate, aclTensor* y,
                                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnGeluV2", workspace_size, executor, 0, [&] {
    check_float_map("aclnnGeluV2", y, {x});
    if (approximate != 0 && approximate != 1)
      throw Error(ACLNN_ERR_PARAM_INVALID, "approximate must be 0 (none) or 1 (tanh)");
    const bool tanh_form = approximate == 1;
    return map_kernel(*y, {*x}, [tanh_form](auto v) { return gelu(v, tanh_form); });
  });
}
H2_EMULATED_RUN(aclnnGeluV2)

ASCEND_EMULATOR_C aclnnStatus aclnnGeluBackwardV2GetWorkspaceSize(const aclTensor* grad_output, const aclTensor* self,
                                                                  char* approximate, aclTensor* grad_input,
                                                                  uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnGeluBackwardV2", workspace_size, executor, 0, [&] {
    check_float_map("aclnnGeluBackwardV2", grad_input, {grad_output, self});
    if (approximate == nullptr || (std::strcmp(approximate, "none") != 0 && std::strcmp(approximate, "tanh") != 0))
      throw Error(ACLNN_ERR_PARAM_INVALID, "approximate must be \"none\" or \"tanh\"");
    const bool tanh_form = std::strcmp(approximate, "tanh") == 0;
    return map_kernel(*grad_input, {*grad_output, *self},
                      [tanh_form](auto dy, auto x) { return dy * gelu_derivative(x, tanh_form); });
  });
}
H2_EMULATED_RUN(aclnnGeluBackwardV2)

ASCEND_EMULATOR_C aclnnStatus aclnnSiluGetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  return plan_operator("aclnnSilu", workspace_size, executor, 0, [&] {
    check_float_map("aclnnSilu", out, {self});
    return map_kernel(*out, {*self}, [](auto x) { return x * sigmoid(x); });
  });
}
H2_EMULATED_RUN(aclnnSilu)

ASCEND_EMULATOR_C aclnnStatus aclnnSiluBackwardGetWorkspaceSize(const aclTensor* grad_output, const aclTensor* self,
                                                                aclTensor* grad_input, uint64_t* workspace_size,
                                                                aclOpExecutor** executor) {
  return plan_operator("aclnnSiluBackward", workspace_size, executor, 0, [&] {
    check_float_map("aclnnSiluBackward", grad_input, {grad_output, self});
    return map_kernel(*grad_input, {*grad_output, *self}, [](auto dy, auto x) {
      const auto s = sigmoid(x);
      return dy * s * (static_cast<decltype(x)>(1) + x * (static_cast<decltype(x)>(1) - s));
    });
  });
}
H2_EMULATED_RUN(aclnnSiluBackward)
