// Emulated aclnn elementwise operators: copy and cast, fill, arithmetic with tensors and scalars,
// and the unary functions.
#include <cmath>
#include <type_traits>

#include "elementwise.hpp"
#include "emulated_op.hpp"

namespace ascend_emulator {

void check_float_map(const char* op, const aclTensor* out, const std::vector<const aclTensor*>& inputs) {
  check_tensor(out, "out");
  if (!is_float(out->dtype))
    throw Error(ACLNN_ERR_PARAM_INVALID,
                std::string(op) + ": out's type " + dtype_name(out->dtype) + " is not supported");
  for (const aclTensor* input : inputs) {
    check_tensor(input, "an input");
    if (input->dtype != out->dtype)
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": an input is " + dtype_name(input->dtype) + ", out " +
                                               dtype_name(out->dtype) + " (the emulator does not promote)");
    if (!broadcasts(input->view, out->view))
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": an input of shape " + shape_text(input->view) +
                                               " does not broadcast to out's " + shape_text(out->view));
  }
}

namespace {

double scalar_value(const aclScalar* scalar, const char* role) {
  if (scalar == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, std::string(role) + " is NULL");
  return scalar->value;
}

template <typename Fn>
aclnnStatus plan_map(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, const aclTensor* out,
                     std::vector<const aclTensor*> inputs, Fn fn) {
  return plan_operator(op, workspace_size, executor, 0, [&] {
    check_float_map(op, out, inputs);
    std::vector<aclTensor> copies;
    for (const aclTensor* input : inputs) copies.push_back(*input);
    return map_kernel(*out, std::move(copies), fn);
  });
}

// x ^ y as the vector unit computes it: integer exponents by repeated multiplication are not
// special-cased, so pow(-2, 3) is NaN as exp(3 log -2) would be; 0^0 = 1.
template <typename T>
T power(T x, T y) {
  return std::pow(x, y);
}

template <typename T>
T maximum(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::max(a, b);
}

template <typename T>
T minimum(T a, T b) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<T>::quiet_NaN() : std::min(a, b);
}

}  // namespace
}  // namespace ascend_emulator

using namespace ascend_emulator;
#define EXPORT ASCEND_EMULATOR_C

// ---- copy and fill ----

EXPORT aclnnStatus aclnnInplaceCopyGetWorkspaceSize(aclTensor* self_ref, const aclTensor* src, uint64_t* workspace_size,
                                                    aclOpExecutor** executor) {
  return plan_operator("aclnnInplaceCopy", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_tensor(self_ref, "selfRef");
    check_tensor(src, "src");
    if (!broadcasts(src->view, self_ref->view))
      throw Error(ACLNN_ERR_PARAM_INVALID,
                  "src " + shape_text(src->view) + " does not broadcast to selfRef " + shape_text(self_ref->view));
    element_size(self_ref->dtype);
    element_size(src->dtype);
    return [out = *self_ref, in = *src](void*) {
      const Elements y(out);
      const Elements x(in, out.view);
      // A cast to a narrower float rounds from FP32, as the vector unit does (DOUBLE is not on it).
      const bool narrow = out.dtype == ACL_FLOAT16 || out.dtype == ACL_BF16;
      for (int64_t i = 0; i < y.count(); ++i) {
        const double value = x.load(i);
        y.store(i, narrow && in.dtype == ACL_DOUBLE ? static_cast<double>(static_cast<float>(value)) : value);
      }
    };
  });
}
H2_EMULATED_RUN(aclnnInplaceCopy)

EXPORT aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor* self_ref, const aclScalar* value,
                                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnInplaceFillScalar", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_tensor(self_ref, "selfRef");
    const double fill = scalar_value(value, "value");
    element_size(self_ref->dtype);
    return [out = *self_ref, fill](void*) {
      const Elements y(out);
      const double stored = is_float(out.dtype) && out.dtype != ACL_DOUBLE ? static_cast<float>(fill) : fill;
      for (int64_t i = 0; i < y.count(); ++i) y.store(i, stored);
    };
  });
}
H2_EMULATED_RUN(aclnnInplaceFillScalar)

// ---- tensor (op) tensor ----

EXPORT aclnnStatus aclnnAddGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                            aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const double a = alpha ? alpha->value : 1.0;
  return plan_map("aclnnAdd", workspace_size, executor, out, {self, other},
                  [a](auto x, auto y) { return a == 1.0 ? x + y : x + static_cast<decltype(x)>(a) * y; });
}
EXPORT aclnnStatus aclnnSubGetWorkspaceSize(const aclTensor* self, const aclTensor* other, const aclScalar* alpha,
                                            aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const double a = alpha ? alpha->value : 1.0;
  return plan_map("aclnnSub", workspace_size, executor, out, {self, other},
                  [a](auto x, auto y) { return a == 1.0 ? x - y : x - static_cast<decltype(x)>(a) * y; });
}
EXPORT aclnnStatus aclnnMulGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                            uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_map("aclnnMul", workspace_size, executor, out, {self, other}, [](auto x, auto y) { return x * y; });
}
EXPORT aclnnStatus aclnnDivGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                            uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_map("aclnnDiv", workspace_size, executor, out, {self, other}, [](auto x, auto y) { return x / y; });
}
EXPORT aclnnStatus aclnnMaximumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_map("aclnnMaximum", workspace_size, executor, out, {self, other},
                  [](auto x, auto y) { return maximum(x, y); });
}
EXPORT aclnnStatus aclnnMinimumGetWorkspaceSize(const aclTensor* self, const aclTensor* other, aclTensor* out,
                                                uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_map("aclnnMinimum", workspace_size, executor, out, {self, other},
                  [](auto x, auto y) { return minimum(x, y); });
}
EXPORT aclnnStatus aclnnPowTensorTensorGetWorkspaceSize(const aclTensor* self, const aclTensor* exponent,
                                                        aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  return plan_map("aclnnPowTensorTensor", workspace_size, executor, out, {self, exponent},
                  [](auto x, auto y) { return power(x, y); });
}
H2_EMULATED_RUN(aclnnAdd)
H2_EMULATED_RUN(aclnnSub)
H2_EMULATED_RUN(aclnnMul)
H2_EMULATED_RUN(aclnnDiv)
H2_EMULATED_RUN(aclnnMaximum)
H2_EMULATED_RUN(aclnnMinimum)
H2_EMULATED_RUN(aclnnPowTensorTensor)

// ---- tensor (op) scalar ----

EXPORT aclnnStatus aclnnAddsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, const aclScalar* alpha,
                                             aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = other ? other->value : 0.0;
  const double a = alpha ? alpha->value : 1.0;
  return plan_map("aclnnAdds", workspace_size, executor, out, {self},
                  [s, a](auto x) { return x + static_cast<decltype(x)>(a) * static_cast<decltype(x)>(s); });
}
EXPORT aclnnStatus aclnnSubsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, const aclScalar* alpha,
                                             aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = other ? other->value : 0.0;
  const double a = alpha ? alpha->value : 1.0;
  return plan_map("aclnnSubs", workspace_size, executor, out, {self},
                  [s, a](auto x) { return x - static_cast<decltype(x)>(a) * static_cast<decltype(x)>(s); });
}
EXPORT aclnnStatus aclnnRsubsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, const aclScalar* alpha,
                                              aclTensor* out, uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = other ? other->value : 0.0;
  const double a = alpha ? alpha->value : 1.0;
  return plan_map("aclnnRsubs", workspace_size, executor, out, {self}, [s, a](auto x) {
    return static_cast<decltype(x)>(s) - (a == 1.0 ? x : static_cast<decltype(x)>(a) * x);
  });
}
EXPORT aclnnStatus aclnnMulsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                             uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = other ? other->value : 0.0;
  return plan_map("aclnnMuls", workspace_size, executor, out, {self},
                  [s](auto x) { return x * static_cast<decltype(x)>(s); });
}
EXPORT aclnnStatus aclnnDivsGetWorkspaceSize(const aclTensor* self, const aclScalar* other, aclTensor* out,
                                             uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = other ? other->value : 0.0;
  return plan_map("aclnnDivs", workspace_size, executor, out, {self},
                  [s](auto x) { return x / static_cast<decltype(x)>(s); });
}
EXPORT aclnnStatus aclnnPowTensorScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* exponent,
                                                        aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  const double s = exponent ? exponent->value : 1.0;
  return plan_map("aclnnPowTensorScalar", workspace_size, executor, out, {self},
                  [s](auto x) { return power(x, static_cast<decltype(x)>(s)); });
}
EXPORT aclnnStatus aclnnClampMinGetWorkspaceSize(const aclTensor* self, const aclScalar* clip_min, aclTensor* out,
                                                 uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = clip_min ? clip_min->value : 0.0;
  return plan_map("aclnnClampMin", workspace_size, executor, out, {self},
                  [s](auto x) { return maximum(x, static_cast<decltype(x)>(s)); });
}
EXPORT aclnnStatus aclnnClampMaxGetWorkspaceSize(const aclTensor* self, const aclScalar* clip_max, aclTensor* out,
                                                 uint64_t* workspace_size, aclOpExecutor** executor) {
  const double s = clip_max ? clip_max->value : 0.0;
  return plan_map("aclnnClampMax", workspace_size, executor, out, {self},
                  [s](auto x) { return minimum(x, static_cast<decltype(x)>(s)); });
}
EXPORT aclnnStatus aclnnPowScalarTensorGetWorkspaceSize(const aclScalar* self, const aclTensor* exponent,
                                                        aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  const double s = self ? self->value : 1.0;
  return plan_map("aclnnPowScalarTensor", workspace_size, executor, out, {exponent},
                  [s](auto x) { return power(static_cast<decltype(x)>(s), x); });
}
H2_EMULATED_RUN(aclnnAdds)
H2_EMULATED_RUN(aclnnSubs)
H2_EMULATED_RUN(aclnnRsubs)
H2_EMULATED_RUN(aclnnMuls)
H2_EMULATED_RUN(aclnnDivs)
H2_EMULATED_RUN(aclnnPowTensorScalar)
H2_EMULATED_RUN(aclnnClampMin)
H2_EMULATED_RUN(aclnnClampMax)
H2_EMULATED_RUN(aclnnPowScalarTensor)

// ---- unary ----

#define H2_EMULATED_UNARY(op, expression)                                                                  \
  EXPORT aclnnStatus op##GetWorkspaceSize(const aclTensor* self, aclTensor* out, uint64_t* workspace_size, \
                                          aclOpExecutor** executor) {                                      \
    return plan_map(#op, workspace_size, executor, out, {self}, [](auto x) { return expression; });        \
  }                                                                                                        \
  H2_EMULATED_RUN(op)

H2_EMULATED_UNARY(aclnnExp, std::exp(x))
H2_EMULATED_UNARY(aclnnLog, std::log(x))
H2_EMULATED_UNARY(aclnnSqrt, std::sqrt(x))
H2_EMULATED_UNARY(aclnnRsqrt, static_cast<decltype(x)>(1) / std::sqrt(x))
H2_EMULATED_UNARY(aclnnNeg, -x)
H2_EMULATED_UNARY(aclnnReciprocal, static_cast<decltype(x)>(1) / x)
H2_EMULATED_UNARY(aclnnAbs, std::fabs(x))
