// reduce on cnnlReduce: SUM (ADD), MEAN (AVG), MAX with the position of the first maximum, and AMAX
// as the MAX of |x|. A 16-bit x reduced into an F32 y is widened first, so the result rounds once.
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

H2_Status op_reduce(H2_Stream* handle, const H2_ReduceArgs* args) {
  return h2::plugin::guarded("reduce", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    std::vector<int64_t> dims;
    for (uint32_t d = 0; d < args->x.rank; ++d)
      if (args->dims_mask & (1u << d)) dims.push_back(d);
    const bool keep = args->keepdim != 0;
    switch (args->op) {
      case H2_REDUCE_SUM: return math.cnnl_reduce(CNNL_REDUCE_ADD, args->y, args->x, dims, keep);
      case H2_REDUCE_MEAN: return math.cnnl_reduce(CNNL_REDUCE_AVG, args->y, args->x, dims, keep);
      case H2_REDUCE_MAX:
        return math.cnnl_reduce(CNNL_REDUCE_MAX, args->y, args->x, dims, keep,
                                args->indices.data != nullptr ? &args->indices : nullptr);
      case H2_REDUCE_AMAX: {
        auto magnitude = math.scratch(args->x.dtype, shape_of(args->x));
        math.unary(h2::plugin::DeviceMath::Unary::abs, magnitude->tensor, args->x);
        return math.cnnl_reduce(CNNL_REDUCE_MAX, args->y, magnitude->tensor, dims, keep);
      }
      default: h2::plugin::fail(H2_STATUS_INVALID_ARGUMENT, "unknown reduction " + std::to_string(args->op));
    }
  });
}

}  // namespace h2::mlu
