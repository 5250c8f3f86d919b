// rotary in FP32. The cos and sin tables depend only on the positions, the base and the head size,
// never on device data, so they are computed on the host in FP64 (rounded once to FP32) and uploaded;
// the pairs (x_a, x_b), views of x in the rotate-half or interleaved layout, are rotated with
// broadcast multiplications: y_a = x_a cos - x_b sin, y_b = x_a sin + x_b cos (sin negated for the
// inverse).
#include <cmath>
#include <vector>

#include "composed_ops.hpp"
#include "dtype_size.hpp"
#include "tensor_views.hpp"

namespace h2::plugin::composed {
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
    view.data = static_cast<char*>(x.data) + step * x.strides[last] * static_cast<int64_t>(dtype_size(x.dtype));
  return view;
}

}  // namespace

void rotary(DeviceMath& math, const H2_RotaryArgs& args) {
  const H2_Tensor& x = args.x;
  const int64_t seq = x.shape[x.rank - 3], head_dim = x.shape[x.rank - 1], half = head_dim / 2;
  std::vector<float> cos_table(static_cast<size_t>(seq * half)), sin_table(cos_table.size());
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(args.position_offset + p) *
                           std::pow(args.base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      cos_table[static_cast<size_t>(p * half + i)] = static_cast<float>(std::cos(angle));
      sin_table[static_cast<size_t>(p * half + i)] =
          static_cast<float>(args.inverse ? -std::sin(angle) : std::sin(angle));
    }
  // The tables as [seq, 1, half]: broadcast over the heads and any leading dimensions.
  auto cos_t = math.scratch(H2_DTYPE_F32, {seq, 1, half}), sin_t = math.scratch(H2_DTYPE_F32, {seq, 1, half});
  if (!cos_table.empty()) {
    math.upload(cos_t->tensor, cos_table.data(), cos_table.size() * sizeof(float));
    math.upload(sin_t->tensor, sin_table.data(), sin_table.size() * sizeof(float));
  }
  const bool interleaved = args.interleaved != 0;
  std::vector<int64_t> half_shape = shape_of(x);
  half_shape.back() = half;
  auto a = math.scratch(H2_DTYPE_F32, half_shape), b = math.scratch(H2_DTYPE_F32, half_shape);
  auto ya = math.scratch(H2_DTYPE_F32, half_shape), yb = math.scratch(H2_DTYPE_F32, half_shape);
  auto term = math.scratch(H2_DTYPE_F32, half_shape);
  math.copy(a->tensor, half_view(x, false, interleaved));
  math.copy(b->tensor, half_view(x, true, interleaved));
  math.binary(H2_BINARY_MUL, ya->tensor, a->tensor, cos_t->tensor);
  math.binary(H2_BINARY_MUL, term->tensor, b->tensor, sin_t->tensor);
  math.add(ya->tensor, ya->tensor, term->tensor, -1.0);
  math.binary(H2_BINARY_MUL, yb->tensor, a->tensor, sin_t->tensor);
  math.binary(H2_BINARY_MUL, term->tensor, b->tensor, cos_t->tensor);
  math.add(yb->tensor, yb->tensor, term->tensor, 1.0);
  math.copy(half_view(args.y, false, interleaved), ya->tensor);
  math.copy(half_view(args.y, true, interleaved), yb->tensor);
}

void causal_mask(DeviceMath& math, const H2_Tensor& mask) {
  const int64_t rows = mask.shape[0], cols = mask.shape[1];
  // distance[i, j] = j - i; masked where it exceeds cols - rows.
  auto column = math.scratch(H2_DTYPE_F32, {1, cols}), row = math.scratch(H2_DTYPE_F32, {rows, 1});
  auto distance = math.scratch(H2_DTYPE_F32, {rows, cols});
  math.arange(reshaped(column->tensor, {cols}), 0.0, 1.0);
  math.arange(reshaped(row->tensor, {rows}), 0.0, 1.0);
  math.add(distance->tensor, column->tensor, row->tensor, -1.0);
  math.greater(mask, distance->tensor, static_cast<double>(cols - rows));
}

}  // namespace h2::plugin::composed
