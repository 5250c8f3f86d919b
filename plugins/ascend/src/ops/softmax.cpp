// softmax and softmax_backward on aclnnSoftmax and aclnnSoftmaxBackward. The ABI's scale is an
// aclnnMuls before (forward) or after (backward). Its causal mask is built on the device: the column
// minus the row index (two aranges, broadcast) compared with cols - rows gives a BOOL [rows, cols]
// mask, broadcast over the leading dimensions by aclnnInplaceMaskedFillScalar: -inf before the
// softmax, and 0 after it, because a masked element is 0 whatever the row holds (a row with every
// element masked, or a NaN elsewhere in it, comes out of aclnnSoftmax as NaN).
#include <limits>
#include <optional>

#include "acl_math.hpp"
#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

H2_Status op_softmax(H2_Stream* handle, const H2_SoftmaxArgs* args) {
  return guarded("softmax", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const AclnnLibrary& nn = ops.nn;
    const H2_Tensor& x = args->x;
    const H2_Tensor& y = args->y;
    const bool causal = args->causal != 0 && y.rank >= 2;
    const bool scaled = args->scale != 1.0;
    if (scaled)
      ops.muls(y, x, args->scale);
    else if (causal && y.data != x.data)
      copy_tensor(*stream, y, x);
    std::optional<ScratchTensor> mask;
    if (causal) {
      mask.emplace(*stream, H2_DTYPE_BOOL, std::vector<int64_t>{y.shape[y.rank - 2], y.shape[y.rank - 1]});
      write_causal_mask(*stream, mask->tensor);
      ops.masked_fill(y, mask->tensor, -std::numeric_limits<double>::infinity());
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
    if (mask) ops.masked_fill(y, mask->tensor, 0.0);
  });
}

H2_Status op_softmax_backward(H2_Stream* handle, const H2_SoftmaxBackwardArgs* args) {
  return guarded("softmax_backward", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const AclnnLibrary& nn = ops.nn;
    {
      AclTensor y(args->y), dy(args->dy), dx(args->dx);
      run_aclnn(
          *stream, "aclnnSoftmaxBackward",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnSoftmaxBackwardWorkspace(dy.get(), y.get(), -1, dx.get(), size, executor);
          },
          nn.aclnnSoftmaxBackward);
    }
    if (args->scale != 1.0) ops.muls(args->dx, args->dx, args->scale);
  });
}

}  // namespace h2::ascend
