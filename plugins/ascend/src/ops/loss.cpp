// cross_entropy and its backward composed from aclnn operators in FP32: the row's log-sum-exp from
// its maximum (aclnnAmax), exp, sum and log; the target's logit by aclnnGather; label smoothing by the
// row mean. Ignored rows are found on the device (aclnnEqScalar on the targets), their target made 0
// before the gather (so only a real target out of range fails the stream, as the ABI asks) and their
// loss and gradient set to 0 after.
#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

// The targets as I64 [n, 1] with ignored ones replaced by 0, and the BOOL [n] mask of ignored rows.
struct Targets {
  Targets(TensorOps& ops, const H2_Tensor& targets, int64_t ignore_index)
      : as_float(ops.stream, H2_DTYPE_F32, shape_of(targets)),
        ignored(ops.stream, H2_DTYPE_BOOL, shape_of(targets)),
        index(ops.stream, H2_DTYPE_I64, {targets.shape[0], 1}) {
    copy_tensor(ops.stream, as_float.tensor, targets);  // exact below 2^24: any vocabulary
    ops.scalar_op("aclnnEqScalar", ops.nn.aclnnEqScalarWorkspace, ops.nn.aclnnEqScalar, ignored.tensor, as_float.tensor,
                  static_cast<double>(ignore_index));
    ops.masked_fill(as_float.tensor, ignored.tensor, 0.0);
    copy_tensor(ops.stream, reshaped(index.tensor, {targets.shape[0]}), as_float.tensor);
  }
  ScratchTensor as_float, ignored, index;
};

}  // namespace

H2_Status op_cross_entropy(H2_Stream* handle, const H2_CrossEntropyArgs* args) {
  return guarded("cross_entropy", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const int64_t n = args->logits.shape[0], vocab = args->logits.shape[1];
    const double s = args->label_smoothing;
    ScratchTensor logits(*stream, H2_DTYPE_F32, {n, vocab}), shifted(*stream, H2_DTYPE_F32, {n, vocab});
    ScratchTensor row_max(*stream, H2_DTYPE_F32, {n, 1}), total(*stream, H2_DTYPE_F32, {n});
    ScratchTensor lse(*stream, H2_DTYPE_F32, {n}), picked(*stream, H2_DTYPE_F32, {n, 1});
    ScratchTensor loss(*stream, H2_DTYPE_F32, {n}), mean(*stream, H2_DTYPE_F32, {n});
    copy_tensor(*stream, logits.tensor, args->logits);
    ops.amax(row_max.tensor, logits.tensor, {1}, true);
    ops.add(shifted.tensor, logits.tensor, row_max.tensor, 1.0, true);
    ops.unary("aclnnExp", ops.nn.aclnnExpWorkspace, ops.nn.aclnnExp, shifted.tensor, shifted.tensor);
    ops.sum(total.tensor, shifted.tensor, {1}, false);
    ops.unary("aclnnLog", ops.nn.aclnnLogWorkspace, ops.nn.aclnnLog, lse.tensor, total.tensor);
    ops.add(lse.tensor, lse.tensor, reshaped(row_max.tensor, {n}), 1.0);
    copy_tensor(*stream, args->lse, lse.tensor);

    const Targets targets(ops, args->targets, args->ignore_index);
    ops.gather(picked.tensor, logits.tensor, 1, targets.index.tensor);
    ops.add(loss.tensor, lse.tensor, reshaped(picked.tensor, {n}), 1 - s, true);
    if (s != 0) {
      ops.sum(mean.tensor, logits.tensor, {1}, false, true);
      ops.add(loss.tensor, loss.tensor, mean.tensor, s, true);
    }
    ops.masked_fill(loss.tensor, targets.ignored.tensor, 0.0);
    copy_tensor(*stream, args->loss, loss.tensor);
  });
}

H2_Status op_cross_entropy_backward(H2_Stream* handle, const H2_CrossEntropyBackwardArgs* args) {
  return guarded("cross_entropy_backward", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const int64_t n = args->logits.shape[0], vocab = args->logits.shape[1];
    const double s = args->label_smoothing;
    ScratchTensor grad(*stream, H2_DTYPE_F32, {n, vocab}), one_hot(*stream, H2_DTYPE_F32, {n, vocab});
    ScratchTensor weight(*stream, H2_DTYPE_F32, {n, 1});
    copy_tensor(*stream, grad.tensor, args->logits);
    // softmax = exp(logits - lse), lse [n] broadcast as [n, 1].
    ops.add(grad.tensor, grad.tensor, appended_dimension(args->lse, 1, 1), 1.0, true);
    ops.unary("aclnnExp", ops.nn.aclnnExpWorkspace, ops.nn.aclnnExp, grad.tensor, grad.tensor);
    const Targets targets(ops, args->targets, args->ignore_index);
    ops.fill(one_hot.tensor, 0.0);
    ops.fill(weight.tensor, 1 - s);
    ops.scatter_add(one_hot.tensor, 1, targets.index.tensor, weight.tensor);
    ops.add(grad.tensor, grad.tensor, one_hot.tensor, 1.0, true);
    if (s != 0) ops.adds(grad.tensor, grad.tensor, -s / static_cast<double>(vocab));
    ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, grad.tensor, grad.tensor,
               appended_dimension(args->dloss, 1, 1));
    ops.masked_fill(grad.tensor, appended_dimension(targets.ignored.tensor, 1, 1), 0.0);
    copy_tensor(*stream, args->dlogits, grad.tensor);
  });
}

}  // namespace h2::ascend
