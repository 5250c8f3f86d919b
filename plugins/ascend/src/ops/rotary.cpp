// rotary composed from aclnn's elementwise operators in FP32. The cos and sin tables depend only on
// the positions, the base and the head size, never on device data, so they are computed on the host
// in FP64 (rounded once to FP32) and uploaded; the pairs (x_a, x_b), views of x in the rotate-half
// or interleaved layout, are rotated with broadcast multiplications: y_a = x_a cos - x_b sin,
// y_b = x_a sin + x_b cos (sin negated for the inverse).
#include <cmath>
#include <vector>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

// One half of the pairs: x_a (second == false) or x_b, as a view of x with head_dim / 2 columns.
H2_Tensor half_view(const H2_Tensor& x, bool second, bool interleaved) {
  H2_Tensor view = x;
  const uint32_t last = x.rank - 1;
  const int64_t half = x.shape[last] / 2;
  view.shape[last] = half;
  const int64_t step = interleaved ? 1 : half;
  if (interleaved) view.strides[last] = 2 * x.strides[last];
  if (second)
    view.data = static_cast<char*>(x.data) + step * x.strides[last] * static_cast<int64_t>(dtype_bytes(x.dtype));
  return view;
}

}  // namespace

H2_Status op_rotary(H2_Stream* handle, const H2_RotaryArgs* args) {
  return guarded("rotary", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    runtime().bind(stream->device);
    const H2_Tensor& x = args->x;
    const int64_t seq = x.shape[x.rank - 3], head_dim = x.shape[x.rank - 1], half = head_dim / 2;
    std::vector<float> cos_table(static_cast<size_t>(seq * half)), sin_table(cos_table.size());
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(args->position_offset + p) *
                             std::pow(args->base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
        cos_table[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
        sin_table[static_cast<size_t>(p * half + i)] =
            static_cast<float>(args->inverse ? -std::sin(angle) : std::sin(angle));
      }
    // The tables as [seq, 1, half]: broadcast over the heads and any leading dimensions.
    ScratchTensor cos_t(*stream, H2_DTYPE_F32, {seq, 1, half}), sin_t(*stream, H2_DTYPE_F32, {seq, 1, half});
    if (!cos_table.empty()) {
      runtime().staging().to_device(stream->stream, cos_t.tensor.data, cos_table.data(),
                                    cos_table.size() * sizeof(float));
      runtime().staging().to_device(stream->stream, sin_t.tensor.data, sin_table.data(),
                                    sin_table.size() * sizeof(float));
    }
    const bool interleaved = args->interleaved != 0;
    std::vector<int64_t> half_shape = shape_of(x);
    half_shape.back() = half;
    ScratchTensor a(*stream, H2_DTYPE_F32, half_shape), b(*stream, H2_DTYPE_F32, half_shape);
    ScratchTensor ya(*stream, H2_DTYPE_F32, half_shape), yb(*stream, H2_DTYPE_F32, half_shape);
    ScratchTensor term(*stream, H2_DTYPE_F32, half_shape);
    copy_tensor(*stream, a.tensor, half_view(x, false, interleaved));
    copy_tensor(*stream, b.tensor, half_view(x, true, interleaved));
    const auto mul = [&](const H2_Tensor& y, const H2_Tensor& p, const H2_Tensor& q) {
      ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, y, p, q);
    };
    mul(ya.tensor, a.tensor, cos_t.tensor);
    mul(term.tensor, b.tensor, sin_t.tensor);
    ops.add(ya.tensor, ya.tensor, term.tensor, 1.0, true);
    mul(yb.tensor, a.tensor, sin_t.tensor);
    mul(term.tensor, b.tensor, cos_t.tensor);
    ops.add(yb.tensor, yb.tensor, term.tensor, 1.0);
    copy_tensor(*stream, half_view(args->y, false, interleaved), ya.tensor);
    copy_tensor(*stream, half_view(args->y, true, interleaved), yb.tensor);
  });
}

}  // namespace h2::ascend
