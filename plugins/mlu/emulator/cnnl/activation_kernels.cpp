// Emulated cnnlActivationForward/Backward: GELU (erf form, or tanh form with `approximate`), SILU,
// SIGMOID and TANH, in FP32.
#include <cmath>
#include <numbers>
#include <type_traits>

#include "cnnl_objects.hpp"
#include "tensor_io.hpp"

namespace mlu_emulator {
namespace {

// CNNL_ACTIVATION_HIGH_PRECISION: GELU is evaluated in FP64 and rounded once (the erf form as
// x * erfc(-x / sqrt 2) / 2, which does not cancel for negative x).
constexpr double kTanhGeluC = 0.044715;

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

double gelu(double x, bool approximate) {
  if (approximate) {
    if (std::isinf(x)) return x > 0 ? x : 0.0;  // the limits of 0.5 x (1 + tanh u)
    // 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), which does not cancel for negative x.
    const double u = std::sqrt(2.0 / std::numbers::pi) * (x + kTanhGeluC * x * x * x);
    return x / (1.0 + std::exp(-2.0 * u));
  }
  return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

double gelu_slope(double x, bool approximate) {
  if (approximate) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(k * (x + kTanhGeluC * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * kTanhGeluC * x * x);
  }
  const double density = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
  return 0.5 * std::erfc(-x / std::numbers::sqrt2) + x * density;
}

void check_descriptor(const cnnlActivationDescriptor_t desc) {
  if (!desc || !desc->set) bad_param("the activation descriptor is NULL or not set");
}

}  // namespace
}  // namespace mlu_emulator

using namespace mlu_emulator;

CNNL_EMULATOR_C cnnlStatus_t cnnlCreateActivationDescriptor(cnnlActivationDescriptor_t* desc) {
  return call("cnnlCreateActivationDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    *desc = new cnnlActivationStruct();
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlDestroyActivationDescriptor(cnnlActivationDescriptor_t desc) {
  return call("cnnlDestroyActivationDescriptor", [&] {
    if (!desc) bad_param("desc is NULL");
    delete desc;
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlSetActivationDescriptor_v6(cnnlActivationDescriptor_t desc, cnnlActivationMode_t mode,
                                                            cnnlActivationPreference_t, cnnlNanPropagation_t, float,
                                                            int, float, float, bool, bool approximate) {
  return call("cnnlSetActivationDescriptor_v6", [&] {
    if (!desc) bad_param("desc is NULL");
    if (mode != CNNL_ACTIVATION_GELU && mode != CNNL_ACTIVATION_SILU && mode != CNNL_ACTIVATION_SIGMOID &&
        mode != CNNL_ACTIVATION_TANH)
      not_supported("activation mode " + std::to_string(static_cast<int>(mode)) + " is not emulated");
    *desc = cnnlActivationStruct{mode, approximate, true};
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlActivationForward(cnnlHandle_t handle, const cnnlActivationDescriptor_t desc,
                                                   const void* alpha, const cnnlTensorDescriptor_t x_desc,
                                                   const void* x, const void* beta, const cnnlTensorDescriptor_t y_desc,
                                                   void* y) {
  return call("cnnlActivationForward", handle, [&](const auto& enqueue) {
    check_descriptor(desc);
    if (alpha || beta) bad_param("alpha and beta are reserved: pass NULL");
    const Operand in = operand(x_desc, x, "x"), out = operand(y_desc, y, "y");
    if (in.dtype != out.dtype || in.dims != out.dims || !is_floating(in.dtype))
      bad_param("x and y must be float tensors of one dtype and shape");
    const cnnlActivationStruct a = *desc;
    enqueue([in, out, a] {
      std::vector<double> v = read(in);
      for (double& e : v) {
        const float t = fp32(e);
        switch (a.mode) {
          case CNNL_ACTIVATION_GELU: e = gelu(e, a.approximate); break;
          case CNNL_ACTIVATION_SILU: e = t * sigmoid(t); break;
          case CNNL_ACTIVATION_SIGMOID: e = sigmoid(t); break;
          case CNNL_ACTIVATION_TANH: e = std::tanh(t); break;
        }
      }
      write(out, v);
    });
  });
}

CNNL_EMULATOR_C cnnlStatus_t cnnlActivationBackward(cnnlHandle_t handle, const cnnlActivationDescriptor_t desc,
                                                    const void* alpha, const cnnlTensorDescriptor_t y_desc,
                                                    const void* y, const cnnlTensorDescriptor_t diff_y_desc,
                                                    const void* diff_y, const cnnlTensorDescriptor_t x_desc,
                                                    const void* x, const void* beta,
                                                    const cnnlTensorDescriptor_t diff_x_desc, void* diff_x) {
  return call("cnnlActivationBackward", handle, [&](const auto& enqueue) {
    check_descriptor(desc);
    if (alpha || beta) bad_param("alpha and beta are reserved: pass NULL");
    const cnnlActivationStruct a = *desc;
    const bool from_output = a.mode == CNNL_ACTIVATION_SIGMOID || a.mode == CNNL_ACTIVATION_TANH;
    // GELU and SILU take the forward's input, SIGMOID and TANH its output; the other stays NULL.
    const Operand saved = from_output ? operand(y_desc, y, "y") : operand(x_desc, x, "x");
    if (from_output ? (x_desc || x) : (y_desc || y))
      bad_param(from_output ? "this mode reads y: pass x as NULL" : "this mode reads x: pass y as NULL");
    const Operand dy = operand(diff_y_desc, diff_y, "diff_y"), dx = operand(diff_x_desc, diff_x, "diff_x");
    if (saved.dims != dy.dims || dy.dims != dx.dims || saved.dtype != dy.dtype || dy.dtype != dx.dtype)
      bad_param("the tensors must share one shape and dtype");
    enqueue([saved, dy, dx, a] {
      const std::vector<double> s = read(saved);
      std::vector<double> g = read(dy);
      for (size_t i = 0; i < g.size(); ++i) {
        const float t = fp32(s[i]), d = fp32(g[i]);
        switch (a.mode) {
          case CNNL_ACTIVATION_GELU: g[i] = d * gelu_slope(s[i], a.approximate); break;
          case CNNL_ACTIVATION_SILU: {
            const float q = sigmoid(t);
            g[i] = d * (q * (1.0f + t * (1.0f - q)));
            break;
          }
          case CNNL_ACTIVATION_SIGMOID: g[i] = d * (t * (1.0f - t)); break;
          case CNNL_ACTIVATION_TANH: g[i] = d * (1.0f - t * t); break;
        }
      }
      write(dx, g);
    });
  });
}

#define H2_CHECK_SIGNATURE(name) static_assert(std::is_same_v<decltype(&name), name##Fn>, #name)
H2_CHECK_SIGNATURE(cnnlCreateActivationDescriptor);
H2_CHECK_SIGNATURE(cnnlDestroyActivationDescriptor);
H2_CHECK_SIGNATURE(cnnlSetActivationDescriptor_v6);
H2_CHECK_SIGNATURE(cnnlActivationForward);
H2_CHECK_SIGNATURE(cnnlActivationBackward);
