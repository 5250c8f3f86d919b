#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

// x's shape without its last dimension: the shape of per-row statistics.
Shape rows_of(const Tensor& x) {
  return Shape(x.shape().begin(), x.shape().end() - 1);
}

void require_row_vector(const OpCheck& check, const Tensor& v, const char* name, const Tensor& x) {
  if (!v.defined()) return;
  check.require_shape(v, name, {x.size(-1)}, "one value per column of x");
}

}  // namespace

void softmax(Stream& stream, const Tensor& x, const Tensor& y, double scale, bool causal) {
  OpCheck check(stream, H2_OP_SOFTMAX);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  check.require_rank_at_least(x, "x", causal ? 2 : 1);
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  auto args = make_args<H2_SoftmaxArgs>();
  args.x = x.descriptor();
  args.y = y.descriptor();
  args.scale = scale;
  args.causal = causal;
  check.call(op_slot(check, check.ops().softmax), args);
}

void softmax_backward(Stream& stream, const Tensor& y, const Tensor& dy, const Tensor& dx, double scale) {
  OpCheck check(stream, H2_OP_SOFTMAX_BACKWARD);
  check.input(y, "y");
  check.input(dy, "dy");
  check.output(dx, "dx", TensorKind::floating, false, {"dy"});
  check.require_rank_at_least(y, "y", 1);
  check.require_same_shape(dy, "dy", y, "y");
  check.require_same_shape(dx, "dx", y, "y");
  check.require_same_dtype(y, "y", dy, "dy");
  check.require_same_dtype(y, "y", dx, "dx");
  auto args = make_args<H2_SoftmaxBackwardArgs>();
  args.y = y.descriptor();
  args.dy = dy.descriptor();
  args.dx = dx.descriptor();
  args.scale = scale;
  check.call(op_slot(check, check.ops().softmax_backward), args);
}

void layer_norm(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                const Tensor& mean, const Tensor& rstd, double eps) {
  OpCheck check(stream, H2_OP_LAYER_NORM);
  check.input(x, "x");
  check.input(weight, "weight", TensorKind::floating, true);
  check.input(bias, "bias", TensorKind::floating, true);
  check.output(y, "y");
  check.output(mean, "mean");
  check.output(rstd, "rstd");
  check.require_rank_at_least(x, "x", 1);
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  require_row_vector(check, weight, "weight", x);
  require_row_vector(check, bias, "bias", x);
  for (auto [t, name] : {std::pair{&mean, "mean"}, std::pair{&rstd, "rstd"}}) {
    check.require_shape(*t, name, rows_of(x), "one statistic per row of x");
    check.require_statistic(*t, name);
  }
  if (!(eps >= 0)) check.fail("eps is " + std::to_string(eps) + " but must not be negative");
  auto args = make_args<H2_LayerNormArgs>();
  args.x = x.descriptor();
  args.weight = weight.descriptor();
  args.bias = bias.descriptor();
  args.y = y.descriptor();
  args.mean = mean.descriptor();
  args.rstd = rstd.descriptor();
  args.eps = eps;
  check.call(op_slot(check, check.ops().layer_norm), args);
}

void layer_norm_backward(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  OpCheck check(stream, H2_OP_LAYER_NORM_BACKWARD);
  check.input(x, "x");
  check.input(weight, "weight", TensorKind::floating, true);
  check.input(mean, "mean");
  check.input(rstd, "rstd");
  check.input(dy, "dy");
  check.output(dx, "dx");
  check.output(dweight, "dweight", TensorKind::floating, true);
  check.output(dbias, "dbias", TensorKind::floating, true);
  check.require_rank_at_least(x, "x", 1);
  check.require_same_shape(dy, "dy", x, "x");
  check.require_same_shape(dx, "dx", x, "x");
  check.require_shape(mean, "mean", rows_of(x), "one statistic per row of x");
  check.require_shape(rstd, "rstd", rows_of(x), "one statistic per row of x");
  require_row_vector(check, weight, "weight", x);
  require_row_vector(check, dweight, "dweight", x);
  require_row_vector(check, dbias, "dbias", x);
  auto args = make_args<H2_LayerNormBackwardArgs>();
  args.x = x.descriptor();
  args.weight = weight.descriptor();
  args.mean = mean.descriptor();
  args.rstd = rstd.descriptor();
  args.dy = dy.descriptor();
  args.dx = dx.descriptor();
  args.dweight = dweight.descriptor();
  args.dbias = dbias.descriptor();
  check.call(op_slot(check, check.ops().layer_norm_backward), args);
}

void rms_norm(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& y, const Tensor& rstd, double eps) {
  OpCheck check(stream, H2_OP_RMS_NORM);
  check.input(x, "x");
  check.input(weight, "weight", TensorKind::floating, true);
  check.output(y, "y");
  check.output(rstd, "rstd");
  check.require_rank_at_least(x, "x", 1);
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  require_row_vector(check, weight, "weight", x);
  check.require_shape(rstd, "rstd", rows_of(x), "one statistic per row of x");
  check.require_statistic(rstd, "rstd");
  if (!(eps >= 0)) check.fail("eps is " + std::to_string(eps) + " but must not be negative");
  auto args = make_args<H2_RmsNormArgs>();
  args.x = x.descriptor();
  args.weight = weight.descriptor();
  args.y = y.descriptor();
  args.rstd = rstd.descriptor();
  args.eps = eps;
  check.call(op_slot(check, check.ops().rms_norm), args);
}

void rms_norm_backward(Stream& stream, const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& dy,
                       const Tensor& dx, const Tensor& dweight) {
  OpCheck check(stream, H2_OP_RMS_NORM_BACKWARD);
  check.input(x, "x");
  check.input(weight, "weight", TensorKind::floating, true);
  check.input(rstd, "rstd");
  check.input(dy, "dy");
  check.output(dx, "dx");
  check.output(dweight, "dweight", TensorKind::floating, true);
  check.require_rank_at_least(x, "x", 1);
  check.require_same_shape(dy, "dy", x, "x");
  check.require_same_shape(dx, "dx", x, "x");
  check.require_shape(rstd, "rstd", rows_of(x), "one statistic per row of x");
  require_row_vector(check, weight, "weight", x);
  require_row_vector(check, dweight, "dweight", x);
  auto args = make_args<H2_RmsNormBackwardArgs>();
  args.x = x.descriptor();
  args.weight = weight.descriptor();
  args.rstd = rstd.descriptor();
  args.dy = dy.descriptor();
  args.dx = dx.descriptor();
  args.dweight = dweight.descriptor();
  check.call(op_slot(check, check.ops().rms_norm_backward), args);
}

}  // namespace h2::ops
