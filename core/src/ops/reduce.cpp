#include <algorithm>

#include "h2/ops.hpp"
#include "op_check.hpp"

namespace h2::ops {

using detail::make_args;
using detail::op_slot;
using detail::OpCheck;
using detail::TensorKind;

void reduce(Stream& stream, ReduceOp op, const Tensor& x, const std::vector<int>& dims, const Tensor& y, bool keepdim,
            const Tensor& indices) {
  OpCheck check(stream, H2_OP_REDUCE);
  check.input(x, "x");
  check.output(y, "y");
  check.output(indices, "indices", TensorKind::index, true);

  uint32_t mask = 0;
  for (int dim : dims) {
    const int d = dim < 0 ? dim + x.rank() : dim;
    if (!(d >= 0 && d < x.rank()))
      check.fail("dimension " + std::to_string(dim) + " is out of range for " + x.describe());
    if (!(!(mask & (1u << d)))) check.fail("dimension " + std::to_string(dim) + " is listed twice");
    mask |= 1u << d;
  }
  Shape expected;
  for (int d = 0; d < x.rank(); ++d) {
    if (!(mask & (1u << d))) {
      expected.push_back(x.shape()[static_cast<size_t>(d)]);
    } else if (keepdim) {
      expected.push_back(1);
    }
  }
  check.require_shape(y, "y", expected, "reducing x over the given dimensions");
  if (!(y.dtype() == x.dtype() || y.dtype() == DType::f32))
    check.fail(OpCheck::is("y", y) + " but must have x's dtype or be f32");
  if (op == ReduceOp::max || op == ReduceOp::amax) {
    for (int d = 0; d < x.rank(); ++d)
      if (!(!(mask & (1u << d)) || x.shape()[static_cast<size_t>(d)] > 0))
        check.fail("the maximum of no elements is undefined (dimension " + std::to_string(d) + " of " + x.describe() +
                   " is empty)");
  }
  if (indices.defined()) {
    if (!(op == ReduceOp::max && dims.size() == 1)) check.fail("indices are given only for max over one dimension");
    check.require_shape(indices, "indices", expected, "the shape of y");
    if (!(indices.dtype() == DType::i64)) check.fail(OpCheck::is("indices", indices) + " but must be i64");
  }

  auto args = make_args<H2_ReduceArgs>();
  switch (op) {
    case ReduceOp::sum: args.op = H2_REDUCE_SUM; break;
    case ReduceOp::mean: args.op = H2_REDUCE_MEAN; break;
    case ReduceOp::max: args.op = H2_REDUCE_MAX; break;
    case ReduceOp::amax: args.op = H2_REDUCE_AMAX; break;
  }
  args.x = x.descriptor();
  args.y = y.descriptor();
  args.indices = indices.descriptor();
  args.dims_mask = mask;
  args.keepdim = keepdim;
  check.call(op_slot(check, check.ops().reduce), args);
}

}  // namespace h2::ops
