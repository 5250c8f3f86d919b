#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

uint64_t philox_counters(int64_t numel) {
  return static_cast<uint64_t>((numel + 3) / 4);
}

void dropout(Stream& stream, const Tensor& x, const Tensor& y, double p, const Philox& rng, const Tensor& mask) {
  OpCheck check(stream, H2_OP_DROPOUT);
  check.input(x, "x");
  check.output(y, "y", TensorKind::floating, false, {"x"});
  check.output(mask, "mask", TensorKind::mask, true);
  if (!(p >= 0 && p < 1)) check.fail("p is " + std::to_string(p) + " but must be in [0, 1)");
  check.require_same_shape(y, "y", x, "x");
  check.require_same_dtype(x, "x", y, "y");
  if (mask.defined()) check.require_same_shape(mask, "mask", x, "x");
  auto args = make_args<H2_DropoutArgs>();
  args.x = x.descriptor();
  args.y = y.descriptor();
  args.mask = mask.descriptor();
  args.p = p;
  args.seed = rng.seed;
  args.offset = rng.offset;
  check.call(op_slot(check, check.ops().dropout), args);
}

void uniform(Stream& stream, const Tensor& y, double low, double high, const Philox& rng) {
  OpCheck check(stream, H2_OP_UNIFORM);
  check.output(y, "y");
  if (!(low <= high)) check.fail("low " + std::to_string(low) + " is above high " + std::to_string(high));
  auto args = make_args<H2_UniformArgs>();
  args.y = y.descriptor();
  args.low = low;
  args.high = high;
  args.seed = rng.seed;
  args.offset = rng.offset;
  check.call(op_slot(check, check.ops().uniform), args);
}

void normal(Stream& stream, const Tensor& y, double mean, double std, const Philox& rng) {
  OpCheck check(stream, H2_OP_NORMAL);
  check.output(y, "y");
  if (!(std >= 0)) check.fail("std is " + std::to_string(std) + " but must not be negative");
  auto args = make_args<H2_NormalArgs>();
  args.y = y.descriptor();
  args.mean = mean;
  args.std = std;
  args.seed = rng.seed;
  args.offset = rng.offset;
  check.call(op_slot(check, check.ops().normal), args);
}

}  // namespace h2::ops
