// reduce on aclnn's reductions: SUM aclnnReduceSum, MEAN aclnnMean, MAX aclnnMaxDim (with indices)
// or aclnnAmax, AMAX aclnnAbs then aclnnAmax. aclnnAmax writes x's dtype, so an F32 result of a
// 16-bit input goes through scratch memory (exactly: a maximum is one of the inputs). A reduction
// over no dimension is a copy (an empty dimension list means "all" to some aclnn operators).
#include <optional>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::fail;
using h2::plugin::guarded;

namespace {

// y = the largest of x over `dims`, through scratch memory when y's dtype is not x's.
void amax(TensorOps& ops, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep, const H2_Tensor& y) {
  std::optional<ScratchTensor> same;
  if (y.dtype != x.dtype) same.emplace(ops.stream, x.dtype, shape_of(y));
  ops.amax(same ? same->tensor : y, x, dims, keep);
  if (same) copy_tensor(ops.stream, y, same->tensor);
}

}  // namespace

H2_Status op_reduce(H2_Stream* handle, const H2_ReduceArgs* args) {
  return guarded("reduce", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const AclnnLibrary& nn = ops.nn;
    std::vector<int64_t> dims;
    for (uint32_t d = 0; d < args->x.rank; ++d)
      if (args->dims_mask & (1u << d)) dims.push_back(d);
    const bool keep = args->keepdim != 0;
    const uint32_t op = args->op;
    if (dims.empty() && args->indices.data == nullptr) return copy_tensor(*stream, args->y, args->x);
    switch (op) {
      case H2_REDUCE_SUM:
      case H2_REDUCE_MEAN: return ops.sum(args->y, args->x, dims, keep, op == H2_REDUCE_MEAN);
      case H2_REDUCE_MAX:
        if (args->indices.data != nullptr) {
          if (dims.size() != 1) fail(H2_STATUS_INVALID_ARGUMENT, "indices need a reduction over exactly one dimension");
          AclTensor x(args->x), y(args->y), indices(args->indices);
          run_aclnn(
              *stream, "aclnnMaxDim",
              [&](uint64_t* size, aclOpExecutor** executor) {
                return nn.aclnnMaxDimWorkspace(x.get(), dims[0], keep, y.get(), indices.get(), size, executor);
              },
              nn.aclnnMaxDim);
          return;
        }
        return amax(ops, args->x, dims, keep, args->y);
      case H2_REDUCE_AMAX: {
        ScratchTensor magnitude(*stream, args->x.dtype, shape_of(args->x));
        ops.unary("aclnnAbs", nn.aclnnAbsWorkspace, nn.aclnnAbs, magnitude.tensor, args->x);
        return amax(ops, magnitude.tensor, dims, keep, args->y);
      }
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown reduction " + std::to_string(op));
    }
  });
}

}  // namespace h2::ascend
