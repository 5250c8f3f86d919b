// binary, binary_scalar, unary, copy, fill, arange, where and masked_fill on CNNL's elementwise
// operators (cnnlOpTensor, cnnlDiv_v2, cnnlPow, cnnlMaximum/Minimum, cnnlTransform_v2, the unary
// family, cnnlSelectV2, cnnlCastDataType and cnnlCopy_v2) through CnnlMath.
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

using h2::plugin::guarded;

namespace {

// Runs `body` with a CnnlMath on `handle`'s stream.
template <typename Body>
H2_Status with_math(const char* name, H2_Stream* handle, Body body) {
  return guarded(name, [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    body(math);
  });
}

}  // namespace

H2_Status op_binary(H2_Stream* handle, const H2_BinaryArgs* args) {
  return with_math("binary", handle, [&](CnnlMath& math) { math.binary(args->op, args->y, args->a, args->b); });
}

// A scalar operand: ADD, SUB and MUL as cnnlTransform_v2 (y = alpha x + beta), the others against a
// one-element F32 tensor.
H2_Status op_binary_scalar(H2_Stream* handle, const H2_BinaryScalarArgs* args) {
  return with_math("binary_scalar", handle, [&](CnnlMath& math) {
    const double s = args->scalar;
    const bool first = args->scalar_first != 0;
    switch (args->op) {
      case H2_BINARY_ADD: return math.transform(args->y, args->x, 1.0, s);
      case H2_BINARY_SUB:
        return first ? math.transform(args->y, args->x, -1.0, s) : math.transform(args->y, args->x, 1.0, -s);
      case H2_BINARY_MUL: return math.transform(args->y, args->x, s, 0.0);
      default: break;
    }
    auto value = math.scratch(H2_DTYPE_F32, {1});
    math.fill(value->tensor, s);
    H2_Tensor scalar = value->tensor;
    scalar.rank = 0;
    if (first)
      math.binary(args->op, args->y, scalar, args->x);
    else
      math.binary(args->op, args->y, args->x, scalar);
  });
}

H2_Status op_unary(H2_Stream* handle, const H2_UnaryArgs* args) {
  return with_math("unary", handle, [&](CnnlMath& math) {
    if (args->op < H2_UNARY_EXP || args->op > H2_UNARY_RECIPROCAL)
      h2::plugin::fail(H2_STATUS_INVALID_ARGUMENT, "unknown unary operation " + std::to_string(args->op));
    math.elementwise(args->op, args->y, args->x);
  });
}

H2_Status op_copy(H2_Stream* handle, const H2_CopyArgs* args) {
  return with_math("copy", handle, [&](CnnlMath& math) { math.copy(args->y, args->x); });
}

H2_Status op_fill(H2_Stream* handle, const H2_FillArgs* args) {
  return with_math("fill", handle, [&](CnnlMath& math) { math.fill(args->y, args->value); });
}

H2_Status op_arange(H2_Stream* handle, const H2_ArangeArgs* args) {
  return with_math("arange", handle, [&](CnnlMath& math) { math.arange(args->y, args->start, args->step); });
}

H2_Status op_where(H2_Stream* handle, const H2_WhereArgs* args) {
  return with_math("where", handle, [&](CnnlMath& math) { math.where(args->y, args->cond, args->a, args->b); });
}

H2_Status op_masked_fill(H2_Stream* handle, const H2_MaskedFillArgs* args) {
  return with_math("masked_fill", handle, [&](CnnlMath& math) {
    if (args->y.data != args->x.data) math.copy(args->y, args->x);
    math.masked_fill(args->y, args->mask, args->value);
  });
}

}  // namespace h2::mlu
