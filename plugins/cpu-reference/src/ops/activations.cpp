// gelu, silu and swiglu with their backwards, elementwise in fp64.
#include <cmath>
#include <numbers>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"

namespace h2::cpu_reference {

namespace {

constexpr double kTanhScale = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kTanhCubic = 0.044715;

// (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)): the tanh form of Phi without the cancellation of 1 + tanh(u)
// far left of 0 (at x = -6, 1 + tanh keeps only 5 digits of fp64).
double tanh_cdf(double x) {
  return 1 / (1 + std::exp(-2 * kTanhScale * (x + kTanhCubic * x * x * x)));
}

double gelu(double x, bool approximate) {
  if (approximate) return std::isinf(x) ? (x > 0 ? x : 0.0) : x * tanh_cdf(x);
  // Phi(x) as erfc: 1 + erf(x / sqrt 2) loses every digit to cancellation far left of 0 (x = -7 keeps 4).
  return 0.5 * x * std::erfc(-x * std::numbers::sqrt2 / 2);
}

double gelu_derivative(double x, bool approximate) {
  if (approximate) {
    const double s = tanh_cdf(x);  // (1 + t) / 2, so (1 - t^2) / 2 = 2 s (1 - s)
    return s + 2 * x * s * (1 - s) * kTanhScale * (1 + 3 * kTanhCubic * x * x);
  }
  const double cdf = 0.5 * std::erfc(-x * std::numbers::sqrt2 / 2);
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double silu(double x) {
  return x * sigmoid(x);
}
double silu_derivative(double x) {
  const double s = sigmoid(x);
  return s * (1 + x * (1 - s));
}

// out[i] = f(inputs...[i]) over whole tensors of one shape.
template <typename F>
Values map(const Values& a, F&& f) {
  Values out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}
template <typename F>
Values map(const Values& a, const Values& b, F&& f) {
  Values out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i], b[i]);
  return out;
}

}  // namespace

H2_Status op_gelu(H2_Stream* stream, const H2_GeluArgs* args) {
  return run_op("gelu", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    const bool approximate = args->approximate != 0;
    call.enqueue([=] { store(y, map(load(x), [&](double v) { return gelu(v, approximate); })); });
  });
}

H2_Status op_gelu_backward(H2_Stream* stream, const H2_GeluBackwardArgs* args) {
  return run_op("gelu_backward", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), dy = call.tensor(args->dy, "dy"), dx = call.tensor(args->dx, "dx");
    const bool approximate = args->approximate != 0;
    call.enqueue([=] {
      store(dx, map(load(x), load(dy), [&](double v, double g) { return g * gelu_derivative(v, approximate); }));
    });
  });
}

H2_Status op_silu(H2_Stream* stream, const H2_SiluArgs* args) {
  return run_op("silu", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), y = call.tensor(args->y, "y");
    call.enqueue([=] { store(y, map(load(x), silu)); });
  });
}

H2_Status op_silu_backward(H2_Stream* stream, const H2_SiluBackwardArgs* args) {
  return run_op("silu_backward", stream, args, [&](OpCall& call) {
    TensorRef x = call.tensor(args->x, "x"), dy = call.tensor(args->dy, "dy"), dx = call.tensor(args->dx, "dx");
    call.enqueue([=] { store(dx, map(load(x), load(dy), [](double v, double g) { return g * silu_derivative(v); })); });
  });
}

H2_Status op_swiglu(H2_Stream* stream, const H2_SwigluArgs* args) {
  return run_op("swiglu", stream, args, [&](OpCall& call) {
    TensorRef gate = call.tensor(args->gate, "gate"), up = call.tensor(args->up, "up"), y = call.tensor(args->y, "y");
    call.enqueue([=] { store(y, map(load(gate), load(up), [](double g, double u) { return silu(g) * u; })); });
  });
}

H2_Status op_swiglu_backward(H2_Stream* stream, const H2_SwigluBackwardArgs* args) {
  return run_op("swiglu_backward", stream, args, [&](OpCall& call) {
    TensorRef gate = call.tensor(args->gate, "gate"), up = call.tensor(args->up, "up");
    TensorRef dy = call.tensor(args->dy, "dy"), dgate = call.tensor(args->dgate, "dgate");
    TensorRef dup = call.tensor(args->dup, "dup");
    call.enqueue([=] {
      const Values g = load(gate), u = load(up), d = load(dy);
      Values dg(g.size()), du(g.size());
      for (size_t i = 0; i < g.size(); ++i) {
        dg[i] = d[i] * u[i] * silu_derivative(g[i]);
        du[i] = d[i] * silu(g[i]);
      }
      store(dgate, dg);
      store(dup, du);
    });
  });
}

}  // namespace h2::cpu_reference
