// where, masked_fill and arange on aclnnSWhere, aclnnInplaceMaskedFillScalar and aclnnArange. Masks
// of U8 become BOOL in scratch memory first; masked_fill writes x into y first when it is not in place.
#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

H2_Status op_where(H2_Stream* handle, const H2_WhereArgs* args) {
  return guarded("where", [&] {
    auto stream = runtime().stream(handle);
    const BoolMask cond(*stream, args->cond);
    TensorOps{*stream}.where(args->y, cond.mask, args->a, args->b);
  });
}

H2_Status op_masked_fill(H2_Stream* handle, const H2_MaskedFillArgs* args) {
  return guarded("masked_fill", [&] {
    auto stream = runtime().stream(handle);
    if (args->y.data != args->x.data) copy_tensor(*stream, args->y, args->x);
    const BoolMask mask(*stream, args->mask);
    TensorOps{*stream}.masked_fill(args->y, mask.mask, args->value);
  });
}

H2_Status op_arange(H2_Stream* handle, const H2_ArangeArgs* args) {
  return guarded("arange", [&] { TensorOps{*runtime().stream(handle)}.arange(args->y, args->start, args->step); });
}

}  // namespace h2::ascend
