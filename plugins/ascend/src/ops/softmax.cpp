// softmax and softmax_backward on aclnnSoftmax and aclnnSoftmaxBackward. The ABI's scale is an
// aclnnMuls before (forward) or after (backward). Its causal mask is built on the device: the column
// minus the row index (two aranges, broadcast) compared with cols - rows gives a BOOL [rows, cols]
// mask, broadcast over the leading dimensions by aclnnInplaceMaskedFillScalar: -inf before the
// softmax, and 0 after it, because a masked element is 0 whatever the row holds (a row with every
// element masked, or a NaN elsewhere in it, comes out of aclnnSoftmax as NaN).
#include <limits>
#include <optional>

#include "aclnn_call.hpp"
#include "op_table.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

void scale_into(Stream& stream, const H2_Tensor& y, const H2_Tensor& x, double scale) {
  const AclnnLibrary& nn = runtime().aclnn();
  AclTensor in(x), out(y);
  AclScalar factor(scale);
  run_aclnn(
      stream, "aclnnMuls",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return nn.aclnnMulsWorkspace(in.get(), factor.get(), out.get(), size, executor);
      },
      nn.aclnnMuls);
}

void masked_fill(Stream& stream, const H2_Tensor& y, const H2_Tensor& mask, double value) {
  const AclnnLibrary& nn = runtime().aclnn();
  AclTensor out(y), m(mask);
  AclScalar v(value);
  run_aclnn(
      stream, "aclnnInplaceMaskedFillScalar",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return nn.aclnnInplaceMaskedFillScalarWorkspace(out.get(), m.get(), v.get(), size, executor);
      },
      nn.aclnnInplaceMaskedFillScalar);
}

// Writes the BOOL [rows, cols] causal mask: j > i + cols - rows.
void write_causal_mask(Stream& stream, const H2_Tensor& mask) {
  const AclnnLibrary& nn = runtime().aclnn();
  const int64_t rows = mask.shape[0], cols = mask.shape[1];
  ScratchTensor column(stream, H2_DTYPE_F32, {1, cols}), row(stream, H2_DTYPE_F32, {rows, 1});
  ScratchTensor distance(stream, H2_DTYPE_F32, {rows, cols});
  for (ScratchTensor* index : {&column, &row}) {
    H2_Tensor flat = index->tensor;  // the arange as the 1-D tensor it is
    flat.rank = 1;
    flat.shape[0] = index == &column ? cols : rows;
    flat.strides[0] = 1;
    AclTensor out(flat);
    const double count = static_cast<double>(flat.shape[0]);
    AclScalar start(0.0), end(count - 0.5), step(1.0);
    run_aclnn(
        stream, "aclnnArange",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnArangeWorkspace(start.get(), end.get(), step.get(), out.get(), size, executor);
        },
        nn.aclnnArange);
  }
  {
    AclTensor j(column.tensor), i(row.tensor), d(distance.tensor);
    AclScalar one(1.0);
    run_aclnn(
        stream, "aclnnSub",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnSubWorkspace(j.get(), i.get(), one.get(), d.get(), size, executor);
        },
        nn.aclnnSub);
  }
  {
    AclTensor d(distance.tensor), m(mask);
    AclScalar threshold(static_cast<double>(cols - rows));
    run_aclnn(
        stream, "aclnnGtScalar",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnGtScalarWorkspace(d.get(), threshold.get(), m.get(), size, executor);
        },
        nn.aclnnGtScalar);
  }
}

}  // namespace

H2_Status op_softmax(H2_Stream* handle, const H2_SoftmaxArgs* args) {
  return guarded("softmax", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    const H2_Tensor& x = args->x;
    const H2_Tensor& y = args->y;
    const bool causal = args->causal != 0 && y.rank >= 2;
    const bool scaled = args->scale != 1.0;
    if (scaled)
      scale_into(*stream, y, x, args->scale);
    else if (causal && y.data != x.data)
      copy_tensor(*stream, y, x);
    std::optional<ScratchTensor> mask;
    if (causal) {
      mask.emplace(*stream, H2_DTYPE_BOOL, std::vector<int64_t>{y.shape[y.rank - 2], y.shape[y.rank - 1]});
      write_causal_mask(*stream, mask->tensor);
      masked_fill(*stream, y, mask->tensor, -std::numeric_limits<double>::infinity());
    }
    {
      AclTensor in(scaled || causal ? y : x), out(y);
      run_aclnn(
          *stream, "aclnnSoftmax",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnSoftmaxWorkspace(in.get(), -1, out.get(), size, executor);
          },
          nn.aclnnSoftmax);
    }
    if (mask) masked_fill(*stream, y, mask->tensor, 0.0);
  });
}

H2_Status op_softmax_backward(H2_Stream* handle, const H2_SoftmaxBackwardArgs* args) {
  return guarded("softmax_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    {
      AclTensor y(args->y), dy(args->dy), dx(args->dx);
      run_aclnn(
          *stream, "aclnnSoftmaxBackward",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnSoftmaxBackwardWorkspace(dy.get(), y.get(), -1, dx.get(), size, executor);
          },
          nn.aclnnSoftmaxBackward);
    }
    if (args->scale != 1.0) scale_into(*stream, args->dx, args->dx, args->scale);
  });
}

}  // namespace h2::ascend
