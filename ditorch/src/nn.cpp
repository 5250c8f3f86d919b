// The neural-network aten operators of a GPT training step on h2::ops: softmax and log_softmax with
// their backwards (over any dimension: the others are strided views), native_layer_norm and its
// backward, gelu and silu with their backwards, embedding's dense backward, nll_loss (forward and
// backward, with ignore_index, class weights and every reduction), and the random operators on the
// device's Philox stream (bernoulli_ for dropout, native_dropout, uniform_, normal_).
#include <ATen/core/Reduction.h>

#include "kernels.hpp"

namespace h2torch {
namespace {

using h2::ops::BinaryOp;
using h2::ops::ReduceOp;
using h2::ops::UnaryOp;

// `t` with dimension `dim` moved last (a view): the H2 operators work over the last dimension.
h2::Tensor dim_last(const h2::Tensor& t, int64_t dim) {
  const int last = t.rank() - 1;
  return dim == last ? t : t.transpose(static_cast<int>(dim), last);
}

h2::Tensor empty_f32(h2::Stream& s, const h2::Shape& shape) {
  return h2::Tensor::empty(s, shape, h2::DType::f32);
}

h2::Shape keep_last(h2::Shape shape) {
  shape.back() = 1;
  return shape;
}

// ---- softmax and log_softmax ----

at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  const int index = one_device("_softmax", {&self, &out});
  check_floating("softmax", self);
  const c10::DeviceGuard guard(h2_device(index));
  resize_out(out, self.sizes());
  if (out.numel() == 0) return out;
  (void)half_to_float;  // out's dtype says it
  dim = c10::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
  if (self.dim() == 0) return out.fill_(1);
  h2::ops::softmax(stream(index), dim_last(operand(self, out.scalar_type()), dim), dim_last(as_h2(out), dim));
  return out;
}
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(half_to_float ? at::kFloat : self.scalar_type()));
  return h2torch::softmax_out(self, dim, half_to_float, out);
}

at::Tensor& softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& grad_input) {
  const int index = one_device("_softmax_backward_data", {&grad_output, &output, &grad_input});
  const c10::DeviceGuard guard(h2_device(index));
  TORCH_CHECK(grad_input.scalar_type() == input_dtype, "_softmax_backward_data: grad_input is ",
              grad_input.scalar_type(), ", the input was ", input_dtype);
  resize_out(grad_input, output.sizes());
  if (grad_input.numel() == 0) return grad_input;
  if (output.dim() == 0) return grad_input.zero_();
  dim = c10::maybe_wrap_dim(dim, output.dim());
  const c10::ScalarType type = output.scalar_type();
  h2::ops::softmax_backward(stream(index), dim_last(as_h2(output), dim), dim_last(operand(grad_output, type), dim),
                            dim_last(as_h2(grad_input), dim));
  return grad_input;
}
at::Tensor softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  at::Tensor grad_input = at::empty(output.sizes(), output.options().dtype(input_dtype));
  return h2torch::softmax_backward_out(grad_output, output, dim, input_dtype, grad_input);
}

// log_softmax(x) = (x - max) - log(sum(exp(x - max))), in f32 over the last dimension of the view.
at::Tensor& log_softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  const int index = one_device("_log_softmax", {&self, &out});
  check_floating("log_softmax", self);
  const c10::DeviceGuard guard(h2_device(index));
  resize_out(out, self.sizes());
  (void)half_to_float;
  if (out.numel() == 0) return out;
  if (self.dim() == 0) return out.zero_();
  dim = c10::maybe_wrap_dim(dim, self.dim());
  h2::Stream& s = stream(index);
  const h2::Tensor x = dim_last(operand(self, at::kFloat), dim);
  const int last = x.rank() - 1;
  const h2::Shape reduced = keep_last(x.shape());
  const h2::Tensor max = empty_f32(s, reduced), shifted = empty_f32(s, x.shape()), total = empty_f32(s, reduced);
  h2::ops::reduce(s, ReduceOp::max, x, {last}, max, true);
  h2::ops::sub(s, x, max.expand(x.shape()), shifted);
  const h2::Tensor exps = empty_f32(s, x.shape());
  h2::ops::unary(s, UnaryOp::exp, shifted, exps);
  h2::ops::reduce(s, ReduceOp::sum, exps, {last}, total, true);
  h2::ops::unary(s, UnaryOp::log, total, total);
  h2::ops::sub(s, shifted, total.expand(x.shape()), shifted);
  h2::ops::copy(s, shifted, dim_last(as_h2(out), dim));
  return out;
}
at::Tensor log_softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor out = at::empty(self.sizes(), self.options().dtype(half_to_float ? at::kFloat : self.scalar_type()));
  return h2torch::log_softmax_out(self, dim, half_to_float, out);
}

// dx = dy - exp(y) * sum(dy).
at::Tensor& log_softmax_backward_out(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                     c10::ScalarType input_dtype, at::Tensor& grad_input) {
  const int index = one_device("_log_softmax_backward_data", {&grad_output, &output, &grad_input});
  const c10::DeviceGuard guard(h2_device(index));
  TORCH_CHECK(grad_input.scalar_type() == input_dtype, "_log_softmax_backward_data: grad_input is ",
              grad_input.scalar_type(), ", the input was ", input_dtype);
  resize_out(grad_input, output.sizes());
  if (grad_input.numel() == 0) return grad_input;
  if (output.dim() == 0) return grad_input.zero_();
  dim = c10::maybe_wrap_dim(dim, output.dim());
  h2::Stream& s = stream(index);
  const h2::Tensor y = dim_last(operand(output, at::kFloat), dim), dy = dim_last(operand(grad_output, at::kFloat), dim);
  const int last = y.rank() - 1;
  const h2::Tensor total = empty_f32(s, keep_last(y.shape())), probs = empty_f32(s, y.shape());
  h2::ops::reduce(s, ReduceOp::sum, dy, {last}, total, true);
  h2::ops::unary(s, UnaryOp::exp, y, probs);
  h2::ops::mul(s, probs, total.expand(y.shape()), probs);
  h2::ops::sub(s, dy, probs, probs);
  h2::ops::copy(s, probs, dim_last(as_h2(grad_input), dim));
  return grad_input;
}
at::Tensor log_softmax_backward(const at::Tensor& grad_output, const at::Tensor& output, int64_t dim,
                                c10::ScalarType input_dtype) {
  at::Tensor grad_input = at::empty(output.sizes(), output.options().dtype(input_dtype));
  return h2torch::log_softmax_backward_out(grad_output, output, dim, input_dtype, grad_input);
}

// ---- layer norm ----

// The rows and the normalised size of `input` under `normalized_shape` (its trailing dimensions).
std::pair<int64_t, int64_t> layer_norm_split(const at::Tensor& input, c10::IntArrayRef normalized_shape) {
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(!normalized_shape.empty() && axis >= 0 && input.sizes().slice(axis).equals(normalized_shape),
              "layer_norm: normalized_shape ", normalized_shape, " is not the trailing shape of the input ",
              input.sizes());
  const int64_t n = c10::multiply_integers(normalized_shape);
  return {n == 0 ? 0 : input.numel() / n, n};
}

h2::Tensor flat_vector(const c10::optional<at::Tensor>& t, int64_t n) {
  if (!t || !t->defined()) return {};
  TORCH_CHECK(t->numel() == n, "layer_norm: weight or bias of ", t->numel(), " elements, expected ", n);
  return as_h2(t->contiguous()).view({n});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::IntArrayRef normalized_shape,
                                                                 const c10::optional<at::Tensor>& weight,
                                                                 const c10::optional<at::Tensor>& bias, double eps) {
  const int index = one_device("native_layer_norm", {&input, weight ? &*weight : &input, bias ? &*bias : &input});
  check_floating("layer_norm", input);
  const c10::DeviceGuard guard(h2_device(index));
  const auto [rows, n] = layer_norm_split(input, normalized_shape);
  const at::Tensor x = input.contiguous();
  at::Tensor y = at::empty(input.sizes(), input.options());
  std::vector<int64_t> stat_shape = input.sizes().vec();
  for (size_t i = stat_shape.size() - normalized_shape.size(); i < stat_shape.size(); ++i) stat_shape[i] = 1;
  at::Tensor mean = at::empty(stat_shape, input.options().dtype(at::kFloat));
  at::Tensor rstd = at::empty(stat_shape, input.options().dtype(at::kFloat));
  if (rows > 0 && n > 0)
    h2::ops::layer_norm(stream(index), as_h2(x).view({rows, n}), flat_vector(weight, n), flat_vector(bias, n),
                        as_h2(y).view({rows, n}), as_h2(mean).view({rows}), as_h2(rstd).view({rows}), eps);
  return {y, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const c10::optional<at::Tensor>& weight, const c10::optional<at::Tensor>& bias,
    std::array<bool, 3> output_mask) {
  const int index = one_device("native_layer_norm_backward", {&grad_out, &input, &mean, &rstd});
  const c10::DeviceGuard guard(h2_device(index));
  const auto [rows, n] = layer_norm_split(input, normalized_shape);
  const bool has_weight = weight && weight->defined(), has_bias = bias && bias->defined();
  // The ABI always computes dx; dweight and dbias when asked.
  at::Tensor dx = at::empty(input.sizes(), input.options());
  at::Tensor dw = output_mask[1] && has_weight ? at::empty(weight->sizes(), weight->options()) : at::Tensor();
  at::Tensor db = output_mask[2] && has_bias ? at::empty(bias->sizes(), bias->options()) : at::Tensor();
  if (rows == 0 || n == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {output_mask[0] ? dx : at::Tensor(), dw, db};
  }
  h2::ops::layer_norm_backward(stream(index), as_h2(input.contiguous()).view({rows, n}), flat_vector(weight, n),
                               as_h2(mean.contiguous()).view({rows}), as_h2(rstd.contiguous()).view({rows}),
                               as_h2(grad_out.contiguous()).view({rows, n}), as_h2(dx).view({rows, n}),
                               dw.defined() ? as_h2(dw).view({n}) : h2::Tensor(),
                               db.defined() ? as_h2(db).view({n}) : h2::Tensor());
  return {output_mask[0] ? dx : at::Tensor(), dw, db};
}

// ---- activations ----

h2::ops::GeluApproximation approximation(c10::string_view name) {
  if (name == "none") return h2::ops::GeluApproximation::none;
  TORCH_CHECK(name == "tanh", "gelu: approximate must be 'none' or 'tanh', not '", std::string(name), "'");
  return h2::ops::GeluApproximation::tanh;
}

at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  const int index = one_device("gelu", {&self, &out});
  check_floating("gelu", self);
  resize_out(out, self.sizes());
  if (out.numel() > 0)
    h2::ops::gelu(stream(index), operand(self, out.scalar_type()), as_h2(out), approximation(approximate));
  return out;
}
at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return h2torch::gelu_out(self, approximate, out);
}
at::Tensor& gelu_inplace(at::Tensor& self, c10::string_view approximate) {
  return h2torch::gelu_out(self, approximate, self);
}

at::Tensor& gelu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  const int index = one_device("gelu_backward", {&grad_output, &self, &grad_input});
  check_floating("gelu_backward", self);
  resize_out(grad_input, self.sizes());
  const c10::ScalarType type = grad_input.scalar_type();
  if (grad_input.numel() > 0)
    h2::ops::gelu_backward(stream(index), operand(self, type), operand(grad_output, type, self.sizes()),
                           as_h2(grad_input), approximation(approximate));
  return grad_input;
}
at::Tensor gelu_backward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  return h2torch::gelu_backward_out(grad_output, self, approximate, grad_input);
}

at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out) {
  const int index = one_device("silu", {&self, &out});
  check_floating("silu", self);
  resize_out(out, self.sizes());
  if (out.numel() > 0) h2::ops::silu(stream(index), operand(self, out.scalar_type()), as_h2(out));
  return out;
}
at::Tensor silu(const at::Tensor& self) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return h2torch::silu_out(self, out);
}
at::Tensor& silu_inplace(at::Tensor& self) {
  return h2torch::silu_out(self, self);
}

at::Tensor& silu_backward_out(const at::Tensor& grad_output, const at::Tensor& self, at::Tensor& grad_input) {
  const int index = one_device("silu_backward", {&grad_output, &self, &grad_input});
  check_floating("silu_backward", self);
  resize_out(grad_input, self.sizes());
  const c10::ScalarType type = grad_input.scalar_type();
  if (grad_input.numel() > 0)
    h2::ops::silu_backward(stream(index), operand(self, type), operand(grad_output, type, self.sizes()),
                           as_h2(grad_input));
  return grad_input;
}
at::Tensor silu_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  return h2torch::silu_backward_out(grad_output, self, grad_input);
}

// ---- embedding ----

at::Tensor embedding_dense_backward(const at::Tensor& grad_output, const at::Tensor& indices, int64_t num_weights,
                                    int64_t padding_idx, bool scale_grad_by_freq) {
  const int index = one_device("embedding_dense_backward", {&grad_output, &indices});
  const c10::DeviceGuard guard(h2_device(index));
  if (scale_grad_by_freq) {  // not an H2 operator: the CPU's, counted
    note_fallback("aten::embedding_dense_backward (scale_grad_by_freq)");
    return at::embedding_dense_backward(grad_output.cpu(), indices.cpu(), num_weights, padding_idx, true)
        .to(grad_output.device());
  }
  const int64_t dim = grad_output.size(-1), n = indices.numel();
  at::Tensor grad_weight = at::empty({num_weights, dim}, grad_output.options());
  if (n == 0 || dim == 0) return grad_weight.zero_();
  h2::ops::embedding_backward(stream(index), as_h2(indices.contiguous()).view({n}),
                              as_h2(grad_output.contiguous()).view({n, dim}), as_h2(grad_weight));
  if (padding_idx >= 0 && padding_idx < num_weights) grad_weight.select(0, padding_idx).zero_();
  return grad_weight;
}

// ---- nll_loss ----

// Which class each row's loss reads ([n, 1] i64, ignored rows reading class 0) and its weight ([n, 1]
// f32: the class weight, 0 for ignored rows).
struct Picked {
  h2::Tensor classes, weights;
};

Picked pick(h2::Stream& s, const at::Tensor& target, const c10::optional<at::Tensor>& weight, int64_t ignore_index,
            int64_t n) {
  const h2::Tensor t = operand(target.reshape({n}), at::kLong);
  const h2::Tensor as_float = empty_f32(s, {n}), valid = empty_f32(s, {n});
  const h2::Tensor valid_bool = h2::Tensor::empty(s, {n}, h2::DType::boolean);
  h2::ops::copy(s, t, as_float);
  h2::ops::binary(s, BinaryOp::sub, as_float, static_cast<double>(ignore_index), valid);
  h2::ops::copy(s, valid, valid_bool);  // target != ignore_index
  h2::ops::copy(s, valid_bool, valid);
  h2::ops::mul(s, as_float, valid, as_float);
  Picked picked{h2::Tensor::empty(s, {n, 1}, h2::DType::i64), valid.view({n, 1})};
  h2::ops::copy(s, as_float.view({n, 1}), picked.classes);
  if (weight && weight->defined()) {
    const h2::Tensor w = empty_f32(s, {n, 1});
    h2::ops::index_select(s, operand(*weight, at::kFloat), 0, picked.classes.view({n}), w.view({n}));
    h2::ops::mul(s, w, picked.weights, w);
    picked.weights = w;
  }
  return picked;
}

std::pair<int64_t, int64_t> nll_rows(const at::Tensor& self, const at::Tensor& target) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "nll_loss: expected 1-D or 2-D input, got ", self.sizes());
  const int64_t n = self.dim() == 2 ? self.size(0) : 1, classes = self.size(-1);
  TORCH_CHECK(target.numel() == n, "nll_loss: expected ", n, " target(s), got ", target.sizes());
  TORCH_CHECK(!c10::isFloatingType(target.scalar_type()), "nll_loss: targets are class indices, not ",
              target.scalar_type());
  return {n, classes};
}

std::tuple<at::Tensor&, at::Tensor&> nll_loss_forward_out(const at::Tensor& self, const at::Tensor& target,
                                                          const c10::optional<at::Tensor>& weight, int64_t reduction,
                                                          int64_t ignore_index, at::Tensor& output,
                                                          at::Tensor& total_weight) {
  const int index = one_device("nll_loss_forward", {&self, &target, &output, &total_weight});
  check_floating("nll_loss", self);
  const c10::DeviceGuard guard(h2_device(index));
  const auto [n, classes] = nll_rows(self, target);
  h2::Stream& s = stream(index);
  const Picked picked = pick(s, target, weight, ignore_index, n);
  const h2::Tensor losses = empty_f32(s, {n, 1});
  h2::ops::gather(s, operand(self, at::kFloat).view({n, classes}), 1, picked.classes, losses);
  h2::ops::mul(s, losses, picked.weights, losses);
  h2::ops::binary(s, BinaryOp::mul, losses, -1.0, losses);
  resize_out(total_weight, {});
  if (reduction == at::Reduction::None && self.dim() == 2) {
    resize_out(output, {n});
    h2::ops::copy(s, losses.view({n}), as_h2(output));
    total_weight.zero_();
    return {output, total_weight};
  }
  resize_out(output, {});
  const h2::Tensor sum = empty_f32(s, {}), total = empty_f32(s, {});
  h2::ops::reduce(s, ReduceOp::sum, losses, {0, 1}, sum);
  h2::ops::reduce(s, ReduceOp::sum, picked.weights, {0, 1}, total);
  if (reduction == at::Reduction::Mean) h2::ops::div(s, sum, total, sum);
  h2::ops::copy(s, sum, as_h2(output));
  h2::ops::copy(s, total, as_h2(total_weight));
  return {output, total_weight};
}
std::tuple<at::Tensor, at::Tensor> nll_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                    const c10::optional<at::Tensor>& weight, int64_t reduction,
                                                    int64_t ignore_index) {
  at::Tensor output = at::empty({0}, self.options()), total_weight = at::empty({0}, self.options());
  nll_loss_forward_out(self, target, weight, reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}

// d self[i, target_i] = -weight_i * grad (/ total_weight under mean); every other element 0.
at::Tensor& nll_loss_backward_out(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                                  const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                  const at::Tensor& total_weight, at::Tensor& grad_input) {
  const int index = one_device("nll_loss_backward", {&grad_output, &self, &target, &total_weight, &grad_input});
  const c10::DeviceGuard guard(h2_device(index));
  const auto [n, classes] = nll_rows(self, target);
  h2::Stream& s = stream(index);
  const Picked picked = pick(s, target, weight, ignore_index, n);
  const h2::Tensor scale = empty_f32(s, {n, 1});
  const h2::Tensor grad = operand(grad_output, at::kFloat);
  if (reduction == at::Reduction::None && self.dim() == 2)
    h2::ops::mul(s, picked.weights, grad.view({n, 1}), scale);
  else
    h2::ops::mul(s, picked.weights, grad.expand({n, 1}), scale);
  if (reduction == at::Reduction::Mean) h2::ops::div(s, scale, operand(total_weight, at::kFloat).expand({n, 1}), scale);
  h2::ops::binary(s, BinaryOp::mul, scale, -1.0, scale);
  const h2::Tensor dx = empty_f32(s, {n, classes});
  h2::ops::fill(s, dx, 0);
  h2::ops::scatter_add(s, dx, 1, picked.classes, scale);
  resize_out(grad_input, self.sizes());
  h2::ops::copy(s, dx, as_h2(grad_input).view({n, classes}));
  return grad_input;
}
at::Tensor nll_loss_backward(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& target,
                             const c10::optional<at::Tensor>& weight, int64_t reduction, int64_t ignore_index,
                             const at::Tensor& total_weight) {
  at::Tensor grad_input = at::empty(self.sizes(), self.options());
  return h2torch::nll_loss_backward_out(grad_output, self, target, weight, reduction, ignore_index, total_weight,
                                        grad_input);
}

// ---- random numbers ----

// self[i] = 1 with probability p (dropout's mask): the ABI's dropout of ones with drop probability
// 1 - p, whose keep mask is the draw.
at::Tensor& bernoulli_float(at::Tensor& self, double p, c10::optional<at::Generator> /*generator*/) {
  const int index = one_device("bernoulli_", {&self});
  TORCH_CHECK(p >= 0 && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  const c10::DeviceGuard guard(h2_device(index));
  if (self.numel() == 0) return self;
  if (p == 0 || p == 1) return self.fill_(p);
  h2::Stream& s = stream(index);
  const h2::Shape shape = shape_of(self.sizes());
  const h2::Tensor ones = empty_f32(s, shape), kept = empty_f32(s, shape);
  const h2::Tensor mask = h2::Tensor::empty(s, shape, h2::DType::boolean);
  h2::ops::fill(s, ones, 1);
  h2::ops::dropout(s, ones, kept, 1 - p, next_philox(), mask);
  h2::ops::copy(s, mask, as_h2(self));
  return self;
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, c10::optional<bool> train) {
  const int index = one_device("native_dropout", {&input});
  check_floating("dropout", input);
  const c10::DeviceGuard guard(h2_device(index));
  at::Tensor output = at::empty(input.sizes(), input.options());
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  if (input.numel() == 0) return {output, mask};
  if ((train.has_value() && !*train) || p == 0) {
    output.copy_(input);
    mask.fill_(true);
  } else if (p >= 1) {
    output.zero_();
    mask.fill_(false);
  } else {
    h2::ops::dropout(stream(index), as_h2(input), as_h2(output), p, next_philox(), as_h2(mask));
  }
  return {output, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  const int index = one_device("native_dropout_backward", {&grad_output, &mask});
  const c10::DeviceGuard guard(h2_device(index));
  at::Tensor grad_input = at::empty(grad_output.sizes(), grad_output.options());
  if (grad_input.numel() == 0) return grad_input;
  h2::Stream& s = stream(index);
  const h2::Tensor y = as_h2(grad_input);
  h2::ops::copy(s, as_h2(mask), y);
  h2::ops::mul(s, y, as_h2(grad_output), y);
  h2::ops::binary(s, BinaryOp::mul, y, scale, y);
  return grad_input;
}

at::Tensor& uniform(at::Tensor& self, double from, double to, c10::optional<at::Generator> /*generator*/) {
  const int index = one_device("uniform_", {&self});
  check_floating("uniform_", self);
  if (self.numel() > 0) h2::ops::uniform(stream(index), as_h2(self), from, to, next_philox());
  return self;
}

at::Tensor& normal(at::Tensor& self, double mean, double std, c10::optional<at::Generator> /*generator*/) {
  const int index = one_device("normal_", {&self});
  check_floating("normal_", self);
  TORCH_CHECK(std >= 0, "normal expects std >= 0.0, but found std ", std);
  if (self.numel() > 0) h2::ops::normal(stream(index), as_h2(self), mean, std, next_philox());
  return self;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  H2_IMPL(m, "_softmax", softmax);
  H2_IMPL(m, "_softmax.out", softmax_out);
  H2_IMPL(m, "_softmax_backward_data", softmax_backward);
  H2_IMPL(m, "_softmax_backward_data.out", softmax_backward_out);
  H2_IMPL(m, "_log_softmax", log_softmax);
  H2_IMPL(m, "_log_softmax.out", log_softmax_out);
  H2_IMPL(m, "_log_softmax_backward_data", log_softmax_backward);
  H2_IMPL(m, "_log_softmax_backward_data.out", log_softmax_backward_out);
  H2_IMPL(m, "native_layer_norm", native_layer_norm);
  H2_IMPL(m, "native_layer_norm_backward", native_layer_norm_backward);
  H2_IMPL(m, "gelu", gelu);
  H2_IMPL(m, "gelu_", gelu_inplace);
  H2_IMPL(m, "gelu.out", gelu_out);
  H2_IMPL(m, "gelu_backward", gelu_backward);
  H2_IMPL(m, "gelu_backward.grad_input", gelu_backward_out);
  H2_IMPL(m, "silu", silu);
  H2_IMPL(m, "silu_", silu_inplace);
  H2_IMPL(m, "silu.out", silu_out);
  H2_IMPL(m, "silu_backward", silu_backward);
  H2_IMPL(m, "silu_backward.grad_input", silu_backward_out);
  H2_IMPL(m, "embedding_dense_backward", embedding_dense_backward);
  H2_IMPL(m, "nll_loss_forward", nll_loss_forward);
  H2_IMPL(m, "nll_loss_forward.output", nll_loss_forward_out);
  H2_IMPL(m, "nll_loss_backward", nll_loss_backward);
  H2_IMPL(m, "nll_loss_backward.grad_input", nll_loss_backward_out);
  H2_IMPL(m, "bernoulli_.float", bernoulli_float);
  H2_IMPL(m, "native_dropout", native_dropout);
  H2_IMPL(m, "native_dropout_backward", native_dropout_backward);
  H2_IMPL(m, "uniform_", uniform);
  H2_IMPL(m, "normal_", normal);
}

}  // namespace h2torch
