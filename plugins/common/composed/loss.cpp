// cross_entropy and its backward in FP32: the row's log-sum-exp from its maximum, exp, sum and log;
// the target's logit by a gather; label smoothing by the row mean. Ignored rows are found on the
// device (targets == ignore_index), their target made 0 before the gather (so only a real target out
// of range fails the stream, as the ABI asks) and their loss and gradient set to 0 after.
#include "composed_ops.hpp"
#include "tensor_views.hpp"

namespace h2::plugin::composed {
namespace {

using Scratch = std::unique_ptr<DeviceMath::Scratch>;
using Unary = DeviceMath::Unary;

// The targets as I64 [n, 1] with ignored ones replaced by 0, and the BOOL [n] mask of ignored rows.
struct Targets {
  Targets(DeviceMath& math, const H2_Tensor& targets, int64_t ignore_index)
      : as_float(math.scratch(H2_DTYPE_F32, shape_of(targets))),
        ignored(math.scratch(H2_DTYPE_BOOL, shape_of(targets))),
        index(math.scratch(H2_DTYPE_I64, {targets.shape[0], 1})) {
    math.copy(as_float->tensor, targets);  // exact below 2^24: any vocabulary
    math.equal(ignored->tensor, as_float->tensor, static_cast<double>(ignore_index));
    math.masked_fill(as_float->tensor, ignored->tensor, 0.0);
    math.copy(reshaped(index->tensor, {targets.shape[0]}), as_float->tensor);
  }
  Scratch as_float, ignored, index;
};

}  // namespace

void cross_entropy(DeviceMath& math, const H2_CrossEntropyArgs& args) {
  const int64_t n = args.logits.shape[0], vocab = args.logits.shape[1];
  const double s = args.label_smoothing;
  Scratch logits = math.scratch(H2_DTYPE_F32, {n, vocab}), shifted = math.scratch(H2_DTYPE_F32, {n, vocab});
  Scratch row_max = math.scratch(H2_DTYPE_F32, {n, 1}), total = math.scratch(H2_DTYPE_F32, {n});
  Scratch lse = math.scratch(H2_DTYPE_F32, {n}), picked = math.scratch(H2_DTYPE_F32, {n, 1});
  Scratch loss = math.scratch(H2_DTYPE_F32, {n}), mean = math.scratch(H2_DTYPE_F32, {n});
  math.copy(logits->tensor, args.logits);
  math.reduce(DeviceMath::Reduce::max, row_max->tensor, logits->tensor, {1}, true);
  math.add(shifted->tensor, logits->tensor, row_max->tensor, -1.0);
  math.unary(Unary::exp, shifted->tensor, shifted->tensor);
  math.reduce(DeviceMath::Reduce::sum, total->tensor, shifted->tensor, {1}, false);
  math.unary(Unary::log, lse->tensor, total->tensor);
  math.add(lse->tensor, lse->tensor, reshaped(row_max->tensor, {n}), 1.0);
  math.copy(args.lse, lse->tensor);

  const Targets targets(math, args.targets, args.ignore_index);
  math.gather(picked->tensor, logits->tensor, 1, targets.index->tensor);
  math.add(loss->tensor, lse->tensor, reshaped(picked->tensor, {n}), -(1 - s));
  if (s != 0) {
    math.reduce(DeviceMath::Reduce::mean, mean->tensor, logits->tensor, {1}, false);
    math.add(loss->tensor, loss->tensor, mean->tensor, -s);
  }
  math.masked_fill(loss->tensor, targets.ignored->tensor, 0.0);
  math.copy(args.loss, loss->tensor);
}

void cross_entropy_backward(DeviceMath& math, const H2_CrossEntropyBackwardArgs& args) {
  const int64_t n = args.logits.shape[0], vocab = args.logits.shape[1];
  const double s = args.label_smoothing;
  Scratch grad = math.scratch(H2_DTYPE_F32, {n, vocab}), one_hot = math.scratch(H2_DTYPE_F32, {n, vocab});
  Scratch weight = math.scratch(H2_DTYPE_F32, {n, 1});
  math.copy(grad->tensor, args.logits);
  // softmax = exp(logits - lse), lse [n] broadcast as [n, 1].
  math.add(grad->tensor, grad->tensor, appended_dimension(args.lse, 1, 1), -1.0);
  math.unary(Unary::exp, grad->tensor, grad->tensor);
  const Targets targets(math, args.targets, args.ignore_index);
  math.fill(one_hot->tensor, 0.0);
  math.fill(weight->tensor, 1 - s);
  math.scatter_add(one_hot->tensor, 1, targets.index->tensor, weight->tensor);
  math.add(grad->tensor, grad->tensor, one_hot->tensor, -1.0);
  if (s != 0) math.shift(grad->tensor, grad->tensor, -s / static_cast<double>(vocab));
  math.binary(H2_BINARY_MUL, grad->tensor, grad->tensor, appended_dimension(args.dloss, 1, 1));
  math.masked_fill(grad->tensor, appended_dimension(targets.ignored->tensor, 1, 1), 0.0);
  math.copy(args.dlogits, grad->tensor);
}

}  // namespace h2::plugin::composed
