// where, masked_fill and arange on aclnnSWhere, aclnnInplaceMaskedFillScalar and aclnnArange. Masks
// of U8 become BOOL in scratch memory first; masked_fill writes x into y first when it is not in place.
#include "aclnn_call.hpp"
#include "op_table.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

H2_Status op_where(H2_Stream* handle, const H2_WhereArgs* args) {
  return guarded("where", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    const BoolMask cond(*stream, args->cond);
    AclTensor c(cond.mask), a(args->a), b(args->b), y(args->y);
    run_aclnn(
        *stream, "aclnnSWhere",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnSWhereWorkspace(c.get(), a.get(), b.get(), y.get(), size, executor);
        },
        nn.aclnnSWhere);
  });
}

H2_Status op_masked_fill(H2_Stream* handle, const H2_MaskedFillArgs* args) {
  return guarded("masked_fill", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    if (args->y.data != args->x.data) copy_tensor(*stream, args->y, args->x);
    const BoolMask mask(*stream, args->mask);
    AclTensor y(args->y), m(mask.mask);
    AclScalar value(args->value);
    run_aclnn(
        *stream, "aclnnInplaceMaskedFillScalar",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnInplaceMaskedFillScalarWorkspace(y.get(), m.get(), value.get(), size, executor);
        },
        nn.aclnnInplaceMaskedFillScalar);
  });
}

H2_Status op_arange(H2_Stream* handle, const H2_ArangeArgs* args) {
  return guarded("arange", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    // aclnnArange counts ceil((end - start) / step) elements: an end half a step short of the last
    // element's successor gives exactly y's count whatever the rounding of the division.
    const double count = static_cast<double>(args->y.shape[0]);
    AclScalar start(args->start), end(args->start + (count - 0.5) * args->step), step(args->step);
    AclTensor y(args->y);
    run_aclnn(
        *stream, "aclnnArange",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnArangeWorkspace(start.get(), end.get(), step.get(), y.get(), size, executor);
        },
        nn.aclnnArange);
  });
}

}  // namespace h2::ascend
