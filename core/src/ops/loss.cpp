#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

namespace {

void require_rows(const OpCheck& check, const Tensor& logits, const Tensor& targets,
                  std::initializer_list<std::pair<const Tensor*, const char*>> per_row) {
  check.require_rank(logits, "logits", 2);
  check.require_shape(targets, "targets", {logits.size(0)}, "one target per row of logits");
  for (auto [t, name] : per_row) {
    check.require_shape(*t, name, {logits.size(0)}, "one value per row of logits");
    check.require_statistic(*t, name);
  }
}

void require_smoothing(const OpCheck& check, const CrossEntropyOptions& options) {
  if (!(options.label_smoothing >= 0 && options.label_smoothing <= 1))
    check.fail("label_smoothing is " + std::to_string(options.label_smoothing) + " but must be in [0, 1]");
}

}  // namespace

void cross_entropy(Stream& stream, const Tensor& logits, const Tensor& targets, const Tensor& loss, const Tensor& lse,
                   const CrossEntropyOptions& options) {
  OpCheck check(stream, H2_OP_CROSS_ENTROPY);
  check.input(logits, "logits");
  check.input(targets, "targets", TensorKind::index);
  check.output(loss, "loss");
  check.output(lse, "lse");
  require_rows(check, logits, targets, {{&loss, "loss"}, {&lse, "lse"}});
  require_smoothing(check, options);
  auto args = make_args<H2_CrossEntropyArgs>();
  args.logits = logits.descriptor();
  args.targets = targets.descriptor();
  args.loss = loss.descriptor();
  args.lse = lse.descriptor();
  args.ignore_index = options.ignore_index;
  args.label_smoothing = options.label_smoothing;
  check.call(op_slot(check, check.ops().cross_entropy), args);
}

void cross_entropy_backward(Stream& stream, const Tensor& logits, const Tensor& targets, const Tensor& lse,
                            const Tensor& dloss, const Tensor& dlogits, const CrossEntropyOptions& options) {
  OpCheck check(stream, H2_OP_CROSS_ENTROPY_BACKWARD);
  check.input(logits, "logits");
  check.input(targets, "targets", TensorKind::index);
  check.input(lse, "lse");
  check.input(dloss, "dloss");
  check.output(dlogits, "dlogits");
  require_rows(check, logits, targets, {{&lse, "lse"}, {&dloss, "dloss"}});
  check.require_same_shape(dlogits, "dlogits", logits, "logits");
  check.require_same_dtype(logits, "logits", dlogits, "dlogits");
  require_smoothing(check, options);
  auto args = make_args<H2_CrossEntropyBackwardArgs>();
  args.logits = logits.descriptor();
  args.targets = targets.descriptor();
  args.lse = lse.descriptor();
  args.dloss = dloss.descriptor();
  args.dlogits = dlogits.descriptor();
  args.ignore_index = options.ignore_index;
  args.label_smoothing = options.label_smoothing;
  check.call(op_slot(check, check.ops().cross_entropy_backward), args);
}

}  // namespace h2::ops
