// gelu (both forms), silu and swiglu, forward and backward.
#include "cases.hpp"

namespace h2::conformance {

namespace {

Case unary_activation(std::string op, std::string name, DType dtype, Shape shape, Fill fill, Layout layout,
                      std::function<void(Stream&, const Tensor&, const Tensor&)> call) {
  Case x{.op = std::move(op), .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .fill = fill, .scale = 3, .layout = layout},
               {.name = "y", .shape = shape, .role = Role::output}};
  x.run = [call](Stream& s, const std::vector<Tensor>& t) { call(s, t[0], t[1]); };
  return x;
}

Case activation_backward(std::string op, std::string name, DType dtype, Shape shape,
                         std::function<void(Stream&, const Tensor&, const Tensor&, const Tensor&)> call) {
  Case x{.op = std::move(op), .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = shape, .scale = 3},
               {.name = "dy", .shape = shape},
               {.name = "dx", .shape = shape, .role = Role::output}};
  x.run = [call](Stream& s, const std::vector<Tensor>& t) { call(s, t[0], t[1], t[2]); };
  // The derivatives cross zero, so errors are bounded relative to the whole output.
  return x;
}

}  // namespace

void add_activation_cases(CaseList& list, const Sizes& s, DType dtype) {
  const Shape mlp{s.tokens(), s.ffn};
  auto& cases = list.cases;
  for (const auto& form_and_label :
       {std::pair{ops::GeluApproximation::none, "erf"}, std::pair{ops::GeluApproximation::tanh, "tanh"}}) {
    // Named, not bound (auto [approximation, label]): clang before 16 cannot capture a binding.
    const ops::GeluApproximation approximation = form_and_label.first;
    const char* label = form_and_label.second;
    auto forward = [approximation](Stream& st, const Tensor& x, const Tensor& y) {
      ops::gelu(st, x, y, approximation);
    };
    auto backward = [approximation](Stream& st, const Tensor& x, const Tensor& dy, const Tensor& dx) {
      ops::gelu_backward(st, x, dy, dx, approximation);
    };
    const std::string form = std::string(label) + " ";
    cases.push_back(
        unary_activation("gelu", form + shape_name(mlp), dtype, mlp, Fill::normal, Layout::contiguous, forward));
    cases.push_back(
        unary_activation("gelu", form + "NaN and infinities", dtype, {64}, Fill::special, Layout::contiguous, forward));
    cases.push_back(unary_activation("gelu", form + "stored transposed", dtype, {13, 21}, Fill::normal,
                                     Layout::transposed, forward));
    cases.push_back(activation_backward("gelu_backward", form + shape_name(mlp), dtype, mlp, backward));
  }
  auto silu = [](Stream& st, const Tensor& x, const Tensor& y) { ops::silu(st, x, y); };
  cases.push_back(unary_activation("silu", shape_name(mlp), dtype, mlp, Fill::normal, Layout::contiguous, silu));
  cases.push_back(unary_activation("silu", "NaN and infinities", dtype, {64}, Fill::special, Layout::contiguous, silu));
  cases.push_back(unary_activation("silu", "unaligned start", dtype, {3, 31}, Fill::normal, Layout::offset, silu));
  cases.push_back(unary_activation("silu", "empty", dtype, {0, 4}, Fill::normal, Layout::contiguous, silu));
  cases.push_back(activation_backward(
      "silu_backward", shape_name(mlp), dtype, mlp,
      [](Stream& st, const Tensor& x, const Tensor& dy, const Tensor& dx) { ops::silu_backward(st, x, dy, dx); }));

  // SwiGLU with gate and up as the two halves of one projection, as LLaMA computes them.
  const int64_t f = s.ffn;
  {
    Case x{.op = "swiglu", .name = "halves of " + shape_name({s.tokens(), 2 * f}), .dtype = dtype};
    x.tensors = {{.name = "gate_up", .shape = {s.tokens(), 2 * f}, .scale = 3},
                 {.name = "y", .shape = mlp, .role = Role::output}};
    x.run = [f](Stream& st, const std::vector<Tensor>& t) {
      ops::swiglu(st, t[0].slice(1, 0, f), t[0].slice(1, f, 2 * f), t[1]);
    };
    cases.push_back(x);
  }
  {
    Case x{.op = "swiglu_backward", .name = "into halves of " + shape_name({s.tokens(), 2 * f}), .dtype = dtype};
    x.tensors = {{.name = "gate", .shape = mlp, .scale = 3},
                 {.name = "up", .shape = mlp, .scale = 3},
                 {.name = "dy", .shape = mlp},
                 {.name = "dgate_dup", .shape = {s.tokens(), 2 * f}, .role = Role::output}};
    x.run = [f](Stream& st, const std::vector<Tensor>& t) {
      ops::swiglu_backward(st, t[0], t[1], t[2], t[3].slice(1, 0, f), t[3].slice(1, f, 2 * f));
    };
    cases.push_back(x);
  }
}

}  // namespace h2::conformance
