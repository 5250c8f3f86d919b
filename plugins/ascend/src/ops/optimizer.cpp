// adamw, grad_norm, clip_by_norm and unscale composed from aclnn's elementwise operators and
// reductions, in FP32 (master weights and optimizer state are FP32 already; 16-bit gradients are
// widened in scratch memory). AdamW is composed although aclnn has aclnnApplyAdamWV2: that operator
// takes beta1 and beta2 as FLOAT, and 1 - beta2 formed from FLOAT 0.999 is off by 1.3e-5 relative,
// an error the second moment then carries (torch forms it in FP64); composed, the scalars stay DOUBLE
// until each multiplication (tried: with aclnnApplyAdamWV2, 15 of 21 AdamW cases fail). Nothing reads a value back to
// the host: found_inf and the norm stay on the device and act through masks and broadcasts, so a skipped AdamW step is
// an aclnnSWhere that keeps the old values, not a host branch.
#include <cmath>
#include <limits>
#include <optional>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

// A scalar F32 tensor of the same shape as `like` (one element).
ScratchTensor scalar_like(Stream& stream, const H2_Tensor& like) {
  return ScratchTensor(stream, H2_DTYPE_F32, shape_of(like));
}

}  // namespace

H2_Status op_adamw(H2_Stream* handle, const H2_AdamWArgs* args) {
  return guarded("adamw", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const double bias1 = 1 - std::pow(args->beta1, static_cast<double>(args->step));
    const double bias2 = 1 - std::pow(args->beta2, static_cast<double>(args->step));
    // found_inf != 0 skips the step: every update lands in scratch and aclnnSWhere keeps the old
    // values where `skip` holds.
    std::optional<ScratchTensor> magnitude, skip;
    if (args->found_inf.data != nullptr) {
      magnitude.emplace(*stream, H2_DTYPE_F32, shape_of(args->found_inf));
      skip.emplace(*stream, H2_DTYPE_BOOL, shape_of(args->found_inf));
      ops.unary("aclnnAbs", ops.nn.aclnnAbsWorkspace, ops.nn.aclnnAbs, magnitude->tensor, args->found_inf);
      ops.scalar_op("aclnnGtScalar", ops.nn.aclnnGtScalarWorkspace, ops.nn.aclnnGtScalar, skip->tensor,
                    magnitude->tensor, 0.0);
    }
    for (uint32_t i = 0; i < args->count; ++i) {
      const H2_Tensor &param = args->params[i], &m = args->exp_avgs[i], &v = args->exp_avg_sqs[i];
      const std::vector<int64_t> shape = shape_of(param);
      ScratchTensor g(*stream, H2_DTYPE_F32, shape), squared(*stream, H2_DTYPE_F32, shape);
      ScratchTensor denominator(*stream, H2_DTYPE_F32, shape), update(*stream, H2_DTYPE_F32, shape);
      copy_tensor(*stream, g.tensor, args->grads[i]);
      if (args->grad_scale != 1.0) ops.muls(g.tensor, g.tensor, args->grad_scale);
      std::optional<ScratchTensor> new_p, new_m, new_v;
      if (skip) {
        for (auto [copy, from] : {std::pair{&new_p, &param}, std::pair{&new_m, &m}, std::pair{&new_v, &v}}) {
          copy->emplace(*stream, H2_DTYPE_F32, shape);
          copy_tensor(*stream, (*copy)->tensor, *from);
        }
      }
      const H2_Tensor& p_out = skip ? new_p->tensor : param;
      const H2_Tensor& m_out = skip ? new_m->tensor : m;
      const H2_Tensor& v_out = skip ? new_v->tensor : v;
      ops.muls(p_out, p_out, 1 - args->lr * args->weight_decay);
      ops.muls(m_out, m_out, args->beta1);
      ops.add(m_out, m_out, g.tensor, 1 - args->beta1);
      ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, squared.tensor, g.tensor, g.tensor);
      ops.muls(v_out, v_out, args->beta2);
      ops.add(v_out, v_out, squared.tensor, 1 - args->beta2);
      ops.divs(denominator.tensor, v_out, bias2);
      ops.unary("aclnnSqrt", ops.nn.aclnnSqrtWorkspace, ops.nn.aclnnSqrt, denominator.tensor, denominator.tensor);
      ops.adds(denominator.tensor, denominator.tensor, args->eps);
      ops.divs(update.tensor, m_out, bias1);
      ops.binary("aclnnDiv", ops.nn.aclnnDivWorkspace, ops.nn.aclnnDiv, update.tensor, update.tensor,
                 denominator.tensor);
      ops.add(p_out, p_out, update.tensor, args->lr, true);
      if (skip) {
        ops.where(param, skip->tensor, param, new_p->tensor);
        ops.where(m, skip->tensor, m, new_m->tensor);
        ops.where(v, skip->tensor, v, new_v->tensor);
      }
      if (args->model_params != nullptr && args->model_params[i].data != nullptr)
        copy_tensor(*stream, args->model_params[i], param);
    }
  });
}

H2_Status op_grad_norm(H2_Stream* handle, const H2_GradNormArgs* args) {
  return guarded("grad_norm", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const bool infinity = std::isinf(args->norm_type) && args->norm_type > 0;
    ScratchTensor total = scalar_like(*stream, args->out), part = scalar_like(*stream, args->out);
    ops.fill(total.tensor, 0.0);
    for (uint32_t i = 0; i < args->count; ++i) {
      const H2_Tensor& t = args->tensors[i];
      ScratchTensor magnitude(*stream, H2_DTYPE_F32, shape_of(t));
      copy_tensor(*stream, magnitude.tensor, t);
      ops.unary("aclnnAbs", ops.nn.aclnnAbsWorkspace, ops.nn.aclnnAbs, magnitude.tensor, magnitude.tensor);
      H2_Tensor part_scalar = part.tensor;
      part_scalar.rank = 0;  // a reduction over every dimension gives a 0-D result
      if (infinity) {
        ops.max_all(part_scalar, magnitude.tensor);
        ops.binary("aclnnMaximum", ops.nn.aclnnMaximumWorkspace, ops.nn.aclnnMaximum, total.tensor, total.tensor,
                   part.tensor);
        continue;
      }
      if (args->norm_type == 2) {
        ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, magnitude.tensor, magnitude.tensor,
                   magnitude.tensor);
      } else if (args->norm_type != 1) {
        ops.scalar_op("aclnnPowTensorScalar", ops.nn.aclnnPowTensorScalarWorkspace, ops.nn.aclnnPowTensorScalar,
                      magnitude.tensor, magnitude.tensor, args->norm_type);
      }
      ops.sum_all(part_scalar, magnitude.tensor);
      ops.add(total.tensor, total.tensor, part.tensor, 1.0);
    }
    if (!infinity && args->norm_type != 1) {
      if (args->norm_type == 2)
        ops.unary("aclnnSqrt", ops.nn.aclnnSqrtWorkspace, ops.nn.aclnnSqrt, total.tensor, total.tensor);
      else
        ops.scalar_op("aclnnPowTensorScalar", ops.nn.aclnnPowTensorScalarWorkspace, ops.nn.aclnnPowTensorScalar,
                      total.tensor, total.tensor, 1 / args->norm_type);
    }
    copy_tensor(*stream, args->out, total.tensor);
  });
}

// Every tensor *= min(1, max_norm / (norm + eps)), the factor computed on the device.
H2_Status op_clip_by_norm(H2_Stream* handle, const H2_ClipByNormArgs* args) {
  return guarded("clip_by_norm", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    ScratchTensor factor = scalar_like(*stream, args->norm);
    ops.adds(factor.tensor, args->norm, args->eps);
    ops.unary("aclnnReciprocal", ops.nn.aclnnReciprocalWorkspace, ops.nn.aclnnReciprocal, factor.tensor, factor.tensor);
    ops.muls(factor.tensor, factor.tensor, args->max_norm);
    ops.scalar_op("aclnnClampMax", ops.nn.aclnnClampMaxWorkspace, ops.nn.aclnnClampMax, factor.tensor, factor.tensor,
                  1.0);
    // 16-bit tensors are scaled in FP32 and rounded once (a 16-bit factor would round twice).
    for (uint32_t i = 0; i < args->count; ++i) {
      const H2_Tensor& t = args->tensors[i];
      std::optional<ScratchTensor> wide;
      if (t.dtype != H2_DTYPE_F32) {
        wide.emplace(*stream, H2_DTYPE_F32, shape_of(t));
        copy_tensor(*stream, wide->tensor, t);
      }
      const H2_Tensor& target = wide ? wide->tensor : t;
      ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, target, target, factor.tensor);
      if (wide) copy_tensor(*stream, t, wide->tensor);
    }
  });
}

// Every tensor *= inv_scale; found_inf = 1 when any element was NaN or infinite before: x * 0 is NaN
// exactly there, so the FP32 sum of it is NaN exactly when one was.
H2_Status op_unscale(H2_Stream* handle, const H2_UnscaleArgs* args) {
  return guarded("unscale", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    ScratchTensor probe = scalar_like(*stream, args->found_inf);
    ScratchTensor finite(*stream, H2_DTYPE_BOOL, shape_of(args->found_inf));
    ScratchTensor not_finite(*stream, H2_DTYPE_BOOL, shape_of(args->found_inf));
    H2_Tensor probe_scalar = probe.tensor;
    probe_scalar.rank = 0;
    for (uint32_t i = 0; i < args->count; ++i) {
      const H2_Tensor& t = args->tensors[i];
      ScratchTensor zeros(*stream, t.dtype, shape_of(t));
      ops.muls(zeros.tensor, t, 0.0);
      ops.sum_all(probe_scalar, zeros.tensor);
      ops.unary("aclnnIsFinite", ops.nn.aclnnIsFiniteWorkspace, ops.nn.aclnnIsFinite, finite.tensor, probe.tensor);
      ops.unary("aclnnLogicalNot", ops.nn.aclnnLogicalNotWorkspace, ops.nn.aclnnLogicalNot, not_finite.tensor,
                finite.tensor);
      ops.masked_fill(args->found_inf, not_finite.tensor, 1.0);
      ops.muls(t, t, args->inv_scale);
    }
  });
}

}  // namespace h2::ascend
