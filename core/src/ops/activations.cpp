#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

// The rule of every elementwise activation: all tensors share x's shape and dtype.
void require_like(const OpCheck& check, const Tensor& x, const char* x_name,
                  std::initializer_list<std::pair<const Tensor*, const char*>> others) {
  for (auto [t, name] : others) {
    check.require_same_shape(*t, name, x, x_name);
    check.require_same_dtype(x, x_name, *t, name);
  }
}

}  // namespace

void gelu(Stream& stream, const Tensor& x, const Tensor& y, GeluApproximation approximation) {
  OpCheck check(stream, H2_OP_GELU);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  require_like(check, x, "x", {{&y, "y"}});
  auto args = make_args<H2_GeluArgs>();
  args.x = x.descriptor();
  args.y = y.descriptor();
  args.approximate = approximation == GeluApproximation::tanh;
  check.call(op_slot(check, check.ops().gelu), args);
}

void gelu_backward(Stream& stream, const Tensor& x, const Tensor& dy, const Tensor& dx,
                   GeluApproximation approximation) {
  OpCheck check(stream, H2_OP_GELU_BACKWARD);
  check.input(x, "x");
  check.input(dy, "dy");
  check.output(dx, "dx", TensorKind::floating, false, {"dy"});
  require_like(check, x, "x", {{&dy, "dy"}, {&dx, "dx"}});
  auto args = make_args<H2_GeluBackwardArgs>();
  args.x = x.descriptor();
  args.dy = dy.descriptor();
  args.dx = dx.descriptor();
  args.approximate = approximation == GeluApproximation::tanh;
  check.call(op_slot(check, check.ops().gelu_backward), args);
}

void silu(Stream& stream, const Tensor& x, const Tensor& y) {
  OpCheck check(stream, H2_OP_SILU);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  require_like(check, x, "x", {{&y, "y"}});
  auto args = make_args<H2_SiluArgs>();
  args.x = x.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().silu), args);
}

void silu_backward(Stream& stream, const Tensor& x, const Tensor& dy, const Tensor& dx) {
  OpCheck check(stream, H2_OP_SILU_BACKWARD);
  check.input(x, "x");
  check.input(dy, "dy");
  check.output(dx, "dx", TensorKind::floating, false, {"dy"});
  require_like(check, x, "x", {{&dy, "dy"}, {&dx, "dx"}});
  auto args = make_args<H2_SiluBackwardArgs>();
  args.x = x.descriptor();
  args.dy = dy.descriptor();
  args.dx = dx.descriptor();
  check.call(op_slot(check, check.ops().silu_backward), args);
}

void swiglu(Stream& stream, const Tensor& gate, const Tensor& up, const Tensor& y) {
  OpCheck check(stream, H2_OP_SWIGLU);
  check.input(gate, "gate");
  check.input(up, "up");
  check.output(y, "y");
  require_like(check, gate, "gate", {{&up, "up"}, {&y, "y"}});
  auto args = make_args<H2_SwigluArgs>();
  args.gate = gate.descriptor();
  args.up = up.descriptor();
  args.y = y.descriptor();
  check.call(op_slot(check, check.ops().swiglu), args);
}

void swiglu_backward(Stream& stream, const Tensor& gate, const Tensor& up, const Tensor& dy, const Tensor& dgate,
                     const Tensor& dup) {
  OpCheck check(stream, H2_OP_SWIGLU_BACKWARD);
  check.input(gate, "gate");
  check.input(up, "up");
  check.input(dy, "dy");
  check.output(dgate, "dgate");
  check.output(dup, "dup");
  require_like(check, gate, "gate", {{&up, "up"}, {&dy, "dy"}, {&dgate, "dgate"}, {&dup, "dup"}});
  auto args = make_args<H2_SwigluBackwardArgs>();
  args.gate = gate.descriptor();
  args.up = up.descriptor();
  args.dy = dy.descriptor();
  args.dgate = dgate.descriptor();
  args.dup = dup.descriptor();
  check.call(op_slot(check, check.ops().swiglu_backward), args);
}

}  // namespace h2::ops
