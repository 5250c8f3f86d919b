// softmax (cnnlSoftmaxForward_v2 / cnnlSoftmaxBackward over the last dimension), layer norm
// (cnnlLayerNormForward / cnnlLayerNormBackward_v2 over the last dimension) and RMS norm (composed:
// CNNL has no RMS norm). All of them work in FP32: 16-bit data is widened in scratch memory and the
// result rounded once, as the reference computes; FP32 data is used in place.
#include <limits>
#include <optional>

#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

using h2::plugin::guarded;
using Scratch = std::unique_ptr<h2::plugin::DeviceMath::Scratch>;

namespace {

int64_t rows_of(const H2_Tensor& t) {
  return h2::plugin::element_count(t) / t.shape[t.rank - 1];
}

// `t` (contiguous) as the [rows, 1, cols] CNNL's LOW_DIMENSION softmax normalizes over its last axis.
H2_Tensor softmax_view(const H2_Tensor& t) {
  return reshaped(t, {rows_of(t), 1, t.shape[t.rank - 1]});
}

// `t` (weight or bias, [n]) as contiguous F32: CNNL describes weight, bias and their gradients with one
// descriptor, so they must share a layout (an ABI weight may be a stride-0 broadcast).
H2_Tensor packed_f32(CnnlMath& math, const H2_Tensor& t, Scratch& holder) {
  if (t.data == nullptr) return H2_Tensor{};
  holder = math.scratch(H2_DTYPE_F32, shape_of(t));
  math.copy(holder->tensor, t);
  return holder->tensor;
}

// A statistic [...] (x's shape without its last dimension) as [..., 1], broadcasting over a row.
H2_Tensor column(const H2_Tensor& statistic) {
  return appended_dimension(statistic, 1, 1);
}

}  // namespace

// y = softmax(scale * x) with the causal mask's entries -inf, and 0 after (so a row with every entry
// masked, or a NaN among its other entries, still has 0 where it is masked).
H2_Status op_softmax(H2_Stream* handle, const H2_SoftmaxArgs* args) {
  return guarded("softmax", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const H2_Tensor &x = args->x, &y = args->y;
    Scratch work = math.scratch(H2_DTYPE_F32, shape_of(y));
    math.transform(work->tensor, x, args->scale, 0.0);
    const bool causal = args->causal != 0 && y.rank >= 2;
    const int64_t rows = y.rank >= 2 ? y.shape[y.rank - 2] : 1, cols = y.shape[y.rank - 1];
    Scratch mask;
    std::optional<H2_Tensor> broadcast_mask;
    if (causal) {
      mask = math.scratch(H2_DTYPE_BOOL, {rows, cols});
      h2::plugin::composed::causal_mask(math, mask->tensor);
      // The [rows, cols] mask broadcast over the leading dimensions.
      H2_Tensor broadcast = work->tensor;
      broadcast.dtype = H2_DTYPE_BOOL;
      broadcast.data = mask->tensor.data;
      for (uint32_t d = 0; d + 2 < broadcast.rank; ++d) broadcast.strides[d] = 0;
      broadcast.strides[broadcast.rank - 2] = cols;
      broadcast.strides[broadcast.rank - 1] = 1;
      broadcast_mask = broadcast;
      math.masked_fill(work->tensor, broadcast, -std::numeric_limits<double>::infinity());
    }
    const TensorDesc view(softmax_view(work->tensor));
    H2_CNNL(runtime().cnnl(), cnnlSoftmaxForward_v2, handle_of(*stream), CNNL_SOFTMAX_ACCURATE,
            CNNL_SOFTMAX_MODE_LOW_DIMENSION, CNNL_COMPUTATION_HIGH_PRECISION, nullptr, view.get(), work->tensor.data,
            nullptr, view.get(), work->tensor.data);
    // Masked entries are 0 whatever the row holds (a NaN elsewhere in it, or every entry masked).
    if (causal) math.masked_fill(work->tensor, *broadcast_mask, 0.0);
    math.copy(y, work->tensor);
  });
}

H2_Status op_softmax_backward(H2_Stream* handle, const H2_SoftmaxBackwardArgs* args) {
  return guarded("softmax_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const std::vector<int64_t> shape = shape_of(args->y);
    Scratch y = math.scratch(H2_DTYPE_F32, shape), dy = math.scratch(H2_DTYPE_F32, shape);
    math.copy(y->tensor, args->y);
    math.copy(dy->tensor, args->dy);
    const TensorDesc view(softmax_view(y->tensor));
    H2_CNNL(runtime().cnnl(), cnnlSoftmaxBackward, handle_of(*stream), CNNL_SOFTMAX_ACCURATE,
            CNNL_SOFTMAX_MODE_LOW_DIMENSION, nullptr, view.get(), y->tensor.data, view.get(), dy->tensor.data, nullptr,
            view.get(), dy->tensor.data);
    math.transform(args->dx, dy->tensor, args->scale, 0.0);
  });
}

H2_Status op_layer_norm(H2_Stream* handle, const H2_LayerNormArgs* args) {
  return guarded("layer_norm", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    Scratch wide_x, wide_w, wide_b, wide_y;
    const H2_Tensor x = math.as_dtype(args->x, H2_DTYPE_F32, wide_x);
    const H2_Tensor w = packed_f32(math, args->weight, wide_w), b = packed_f32(math, args->bias, wide_b);
    if (args->y.dtype != H2_DTYPE_F32) wide_y = math.scratch(H2_DTYPE_F32, shape_of(args->y));
    const H2_Tensor& y = wide_y ? wide_y->tensor : args->y;
    const int axis = static_cast<int>(x.rank) - 1;
    // weight and bias share one descriptor: [n] F32 (made from whichever is given).
    const H2_Tensor affine = w.data ? w : b;
    TensorDesc in(x), out(y), weight_bias(affine), statistics(args->mean);
    const CnnlLibrary& cnnl = runtime().cnnl();
    size_t bytes = 0;
    H2_CNNL(cnnl, cnnlGetLayerNormOpWorkspaceSize, handle_of(*stream), axis, in.get(), &bytes);
    StreamScratch workspace(*stream, bytes);
    H2_CNNL(cnnl, cnnlLayerNormForward, handle_of(*stream), in.get(), x.data, axis, weight_bias.get(), w.data, b.data,
            static_cast<float>(args->eps), workspace.data(), bytes, out.get(), y.data, statistics.get(),
            args->mean.data, args->rstd.data);
    if (wide_y) math.copy(args->y, y);
  });
}

H2_Status op_layer_norm_backward(H2_Stream* handle, const H2_LayerNormBackwardArgs* args) {
  return guarded("layer_norm_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    Scratch wide_x, wide_w, wide_dy, wide_dx, wide_dw, wide_db;
    const H2_Tensor x = math.as_dtype(args->x, H2_DTYPE_F32, wide_x);
    const H2_Tensor dy = math.as_dtype(args->dy, H2_DTYPE_F32, wide_dy);
    const H2_Tensor w = packed_f32(math, args->weight, wide_w);
    const int64_t n = x.shape[x.rank - 1];
    // dx in place when it is F32; dweight and dbias always through contiguous F32 scratch (they share
    // the weight's descriptor), copied out after.
    auto output = [&](const H2_Tensor& t, Scratch& wide, bool packed) -> H2_Tensor {
      if (t.data == nullptr || (!packed && t.dtype == H2_DTYPE_F32)) return t;
      wide = math.scratch(H2_DTYPE_F32, shape_of(t));
      return wide->tensor;
    };
    const H2_Tensor dx = output(args->dx, wide_dx, false), dw = output(args->dweight, wide_dw, true);
    const H2_Tensor db = output(args->dbias, wide_db, true);
    // weight, dweight and dbias share one descriptor: [n] F32.
    Scratch affine_shape = math.scratch(H2_DTYPE_F32, {n});
    const bool affine = w.data || dw.data || db.data;
    TensorDesc in(x), grad(dy), out(dx), statistics(args->mean);
    TensorDesc weight_bias(affine ? affine_shape->tensor : H2_Tensor{});
    const CnnlLibrary& cnnl = runtime().cnnl();
    const int axis = static_cast<int>(x.rank) - 1;
    size_t bytes = 0;
    H2_CNNL(cnnl, cnnlGetLayerNormBackwardWorkspaceSize, handle_of(*stream), in.get(), axis, &bytes);
    StreamScratch workspace(*stream, bytes);
    H2_CNNL(cnnl, cnnlLayerNormBackward_v2, handle_of(*stream), in.get(), x.data, axis, grad.get(), dy.data,
            weight_bias.get(), w.data, statistics.get(), args->mean.data, args->rstd.data, workspace.data(), bytes,
            out.get(), dx.data, dw.data, db.data);
    if (wide_dx) math.copy(args->dx, dx);
    if (wide_dw) math.copy(args->dweight, dw);
    if (wide_db) math.copy(args->dbias, db);
  });
}

// y = x * rstd * weight with rstd = 1 / sqrt(mean(x^2) + eps) over the last dimension, in FP32.
H2_Status op_rms_norm(H2_Stream* handle, const H2_RmsNormArgs* args) {
  return guarded("rms_norm", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const std::vector<int64_t> shape = shape_of(args->x);
    std::vector<int64_t> row_shape = shape;
    row_shape.back() = 1;
    Scratch x = math.scratch(H2_DTYPE_F32, shape), y = math.scratch(H2_DTYPE_F32, shape);
    Scratch rstd = math.scratch(H2_DTYPE_F32, row_shape);
    math.copy(x->tensor, args->x);
    math.binary(H2_BINARY_MUL, y->tensor, x->tensor, x->tensor);
    math.reduce(h2::plugin::DeviceMath::Reduce::mean, rstd->tensor, y->tensor, {static_cast<int64_t>(shape.size()) - 1},
                true);
    math.shift(rstd->tensor, rstd->tensor, args->eps);
    math.elementwise(H2_UNARY_RSQRT, rstd->tensor, rstd->tensor);
    math.binary(H2_BINARY_MUL, y->tensor, x->tensor, rstd->tensor);
    if (args->weight.data) math.binary(H2_BINARY_MUL, y->tensor, y->tensor, args->weight);
    math.copy(args->y, y->tensor);
    math.copy(column(args->rstd), rstd->tensor);
  });
}

// dx = rstd * (g - xhat * mean(g * xhat)) with g = dy * weight and xhat = x * rstd; dweight = the sum
// over rows of dy * xhat.
H2_Status op_rms_norm_backward(H2_Stream* handle, const H2_RmsNormBackwardArgs* args) {
  return guarded("rms_norm_backward", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const std::vector<int64_t> shape = shape_of(args->x);
    std::vector<int64_t> row_shape = shape;
    row_shape.back() = 1;
    const int64_t last = static_cast<int64_t>(shape.size()) - 1;
    Scratch xhat = math.scratch(H2_DTYPE_F32, shape), g = math.scratch(H2_DTYPE_F32, shape);
    Scratch term = math.scratch(H2_DTYPE_F32, shape), rstd = math.scratch(H2_DTYPE_F32, row_shape);
    Scratch mean = math.scratch(H2_DTYPE_F32, row_shape);
    math.copy(rstd->tensor, column(args->rstd));
    math.copy(xhat->tensor, args->x);
    math.binary(H2_BINARY_MUL, xhat->tensor, xhat->tensor, rstd->tensor);
    math.copy(g->tensor, args->dy);
    if (args->dweight.data) {
      std::vector<int64_t> rows;
      for (int64_t d = 0; d < last; ++d) rows.push_back(d);
      math.binary(H2_BINARY_MUL, term->tensor, g->tensor, xhat->tensor);
      Scratch dweight = math.scratch(H2_DTYPE_F32, {shape.back()});
      math.reduce(h2::plugin::DeviceMath::Reduce::sum, dweight->tensor, term->tensor, rows, false);
      math.copy(args->dweight, dweight->tensor);
    }
    if (args->weight.data) math.binary(H2_BINARY_MUL, g->tensor, g->tensor, args->weight);
    math.binary(H2_BINARY_MUL, term->tensor, g->tensor, xhat->tensor);
    math.reduce(h2::plugin::DeviceMath::Reduce::mean, mean->tensor, term->tensor, {last}, true);
    math.binary(H2_BINARY_MUL, term->tensor, xhat->tensor, mean->tensor);
    math.add(g->tensor, g->tensor, term->tensor, -1.0);
    math.binary(H2_BINARY_MUL, g->tensor, g->tensor, rstd->tensor);
    math.copy(args->dx, g->tensor);
  });
}

}  // namespace h2::mlu
