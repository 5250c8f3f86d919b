// adamw, grad_norm, clip_by_norm and unscale in FP32 (master weights and optimizer state are FP32
// already; 16-bit gradients are widened in scratch memory). The scalars stay FP64 until each
// multiplication (torch forms 1 - beta2 in FP64; formed from FLOAT 0.999 it is off by 1.3e-5
// relative, an error the second moment then carries). Nothing reads a value back to the host:
// found_inf and the norm stay on the device and act through masks and broadcasts, so a skipped AdamW
// step is a `where` that keeps the old values, not a host branch.
#include <cmath>
#include <optional>

#include "composed_ops.hpp"
#include "tensor_views.hpp"

namespace h2::plugin::composed {
namespace {

using Scratch = std::unique_ptr<DeviceMath::Scratch>;

// A scalar F32 tensor of the same shape as `like` (one element).
Scratch scalar_like(DeviceMath& math, const H2_Tensor& like) {
  return math.scratch(H2_DTYPE_F32, shape_of(like));
}

// `t` as a 0-D tensor: what a reduction over every dimension writes.
H2_Tensor as_scalar(H2_Tensor t) {
  t.rank = 0;
  return t;
}

}  // namespace

void adamw(DeviceMath& math, const H2_AdamWArgs& args) {
  const double bias1 = 1 - std::pow(args.beta1, static_cast<double>(args.step));
  const double bias2 = 1 - std::pow(args.beta2, static_cast<double>(args.step));
  // found_inf != 0 skips the step: every update lands in scratch and `where` keeps the old values
  // where `skip` holds.
  Scratch skip;
  if (args.found_inf.data != nullptr) {
    Scratch magnitude = math.scratch(H2_DTYPE_F32, shape_of(args.found_inf));
    skip = math.scratch(H2_DTYPE_BOOL, shape_of(args.found_inf));
    math.unary(DeviceMath::Unary::abs, magnitude->tensor, args.found_inf);
    math.greater(skip->tensor, magnitude->tensor, 0.0);
  }
  for (uint32_t i = 0; i < args.count; ++i) {
    const H2_Tensor &param = args.params[i], &m = args.exp_avgs[i], &v = args.exp_avg_sqs[i];
    const std::vector<int64_t> shape = shape_of(param);
    Scratch g = math.scratch(H2_DTYPE_F32, shape), squared = math.scratch(H2_DTYPE_F32, shape);
    Scratch denominator = math.scratch(H2_DTYPE_F32, shape), update = math.scratch(H2_DTYPE_F32, shape);
    math.copy(g->tensor, args.grads[i]);
    if (args.grad_scale != 1.0) math.scale(g->tensor, g->tensor, args.grad_scale);
    Scratch new_p, new_m, new_v;
    if (skip) {
      for (auto [copy, from] : {std::pair{&new_p, &param}, std::pair{&new_m, &m}, std::pair{&new_v, &v}}) {
        *copy = math.scratch(H2_DTYPE_F32, shape);
        math.copy((*copy)->tensor, *from);
      }
    }
    const H2_Tensor& p_out = skip ? new_p->tensor : param;
    const H2_Tensor& m_out = skip ? new_m->tensor : m;
    const H2_Tensor& v_out = skip ? new_v->tensor : v;
    math.scale(p_out, p_out, 1 - args.lr * args.weight_decay);
    math.scale(m_out, m_out, args.beta1);
    math.add(m_out, m_out, g->tensor, 1 - args.beta1);
    math.binary(H2_BINARY_MUL, squared->tensor, g->tensor, g->tensor);
    math.scale(v_out, v_out, args.beta2);
    math.add(v_out, v_out, squared->tensor, 1 - args.beta2);
    math.divide(denominator->tensor, v_out, bias2);
    math.unary(DeviceMath::Unary::sqrt, denominator->tensor, denominator->tensor);
    math.shift(denominator->tensor, denominator->tensor, args.eps);
    math.divide(update->tensor, m_out, bias1);
    math.binary(H2_BINARY_DIV, update->tensor, update->tensor, denominator->tensor);
    math.add(p_out, p_out, update->tensor, -args.lr);
    if (skip) {
      math.where(param, skip->tensor, param, new_p->tensor);
      math.where(m, skip->tensor, m, new_m->tensor);
      math.where(v, skip->tensor, v, new_v->tensor);
    }
    if (args.model_params != nullptr && args.model_params[i].data != nullptr) math.copy(args.model_params[i], param);
  }
}

void grad_norm(DeviceMath& math, const H2_GradNormArgs& args) {
  const bool infinity = std::isinf(args.norm_type) && args.norm_type > 0;
  Scratch total = scalar_like(math, args.out), part = scalar_like(math, args.out);
  math.fill(total->tensor, 0.0);
  for (uint32_t i = 0; i < args.count; ++i) {
    const H2_Tensor& t = args.tensors[i];
    Scratch magnitude = math.scratch(H2_DTYPE_F32, shape_of(t));
    math.copy(magnitude->tensor, t);
    math.unary(DeviceMath::Unary::abs, magnitude->tensor, magnitude->tensor);
    if (infinity) {
      math.reduce(DeviceMath::Reduce::max, as_scalar(part->tensor), magnitude->tensor, all_dims(t), false);
      math.binary(H2_BINARY_MAXIMUM, total->tensor, total->tensor, part->tensor);
      continue;
    }
    if (args.norm_type == 2)
      math.binary(H2_BINARY_MUL, magnitude->tensor, magnitude->tensor, magnitude->tensor);
    else if (args.norm_type != 1)
      math.power(magnitude->tensor, magnitude->tensor, args.norm_type);
    math.reduce(DeviceMath::Reduce::sum, as_scalar(part->tensor), magnitude->tensor, all_dims(t), false);
    math.add(total->tensor, total->tensor, part->tensor, 1.0);
  }
  if (!infinity && args.norm_type != 1) {
    if (args.norm_type == 2)
      math.unary(DeviceMath::Unary::sqrt, total->tensor, total->tensor);
    else
      math.power(total->tensor, total->tensor, 1 / args.norm_type);
  }
  math.copy(args.out, total->tensor);
}

// Every tensor *= min(1, max_norm / (norm + eps)), the factor computed on the device.
void clip_by_norm(DeviceMath& math, const H2_ClipByNormArgs& args) {
  Scratch factor = scalar_like(math, args.norm);
  math.shift(factor->tensor, args.norm, args.eps);
  math.unary(DeviceMath::Unary::reciprocal, factor->tensor, factor->tensor);
  math.scale(factor->tensor, factor->tensor, args.max_norm);
  math.clamp_max(factor->tensor, factor->tensor, 1.0);
  // 16-bit tensors are scaled in FP32 and rounded once (a 16-bit factor would round twice).
  for (uint32_t i = 0; i < args.count; ++i) {
    const H2_Tensor& t = args.tensors[i];
    Scratch wide;
    if (t.dtype != H2_DTYPE_F32) {
      wide = math.scratch(H2_DTYPE_F32, shape_of(t));
      math.copy(wide->tensor, t);
    }
    const H2_Tensor& target = wide ? wide->tensor : t;
    math.binary(H2_BINARY_MUL, target, target, factor->tensor);
    if (wide) math.copy(t, wide->tensor);
  }
}

// Every tensor *= inv_scale; found_inf = 1 when any element was NaN or infinite before: x * 0 is NaN
// exactly there, so the FP32 sum of it is NaN exactly when one was.
void unscale(DeviceMath& math, const H2_UnscaleArgs& args) {
  Scratch probe = scalar_like(math, args.found_inf);
  Scratch not_finite = math.scratch(H2_DTYPE_BOOL, shape_of(args.found_inf));
  for (uint32_t i = 0; i < args.count; ++i) {
    const H2_Tensor& t = args.tensors[i];
    Scratch zeros = math.scratch(t.dtype, shape_of(t));
    math.scale(zeros->tensor, t, 0.0);
    math.reduce(DeviceMath::Reduce::sum, as_scalar(probe->tensor), zeros->tensor, all_dims(t), false);
    math.not_finite(not_finite->tensor, probe->tensor);
    math.masked_fill(args.found_inf, not_finite->tensor, 1.0);
    math.scale(t, t, args.inv_scale);
  }
}

}  // namespace h2::plugin::composed
