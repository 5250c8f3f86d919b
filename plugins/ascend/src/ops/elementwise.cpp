// copy, fill, binary, binary_scalar and unary on aclnn's elementwise operators. aclnn describes any
// strides (a broadcast input is a stride-0 view), so each ABI call is one aclnn call, except a
// scalar divided by a tensor, which aclnn has no scalar form of: the scalar is filled into a
// one-element scratch tensor that broadcasts.
#include "aclnn_call.hpp"
#include "op_slots.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::fail;
using h2::plugin::guarded;

H2_Status op_copy(H2_Stream* handle, const H2_CopyArgs* args) {
  return guarded("copy", [&] { copy_tensor(*runtime().stream(handle), args->y, args->x); });
}

H2_Status op_fill(H2_Stream* handle, const H2_FillArgs* args) {
  return guarded("fill", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor y(args->y);
    AclScalar value(args->value);
    run_aclnn(
        *stream, "aclnnInplaceFillScalar",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnInplaceFillScalarWorkspace(y.get(), value.get(), size, executor);
        },
        nn.aclnnInplaceFillScalar);
  });
}

H2_Status op_binary(H2_Stream* handle, const H2_BinaryArgs* args) {
  return guarded("binary", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor a(args->a), b(args->b), y(args->y);
    const uint32_t op = args->op;
    if (op == H2_BINARY_ADD || op == H2_BINARY_SUB) {
      AclScalar one(1.0);
      const auto plan = op == H2_BINARY_ADD ? nn.aclnnAddWorkspace : nn.aclnnSubWorkspace;
      run_aclnn(
          *stream, op == H2_BINARY_ADD ? "aclnnAdd" : "aclnnSub",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return plan(a.get(), b.get(), one.get(), y.get(), size, executor);
          },
          op == H2_BINARY_ADD ? nn.aclnnAdd : nn.aclnnSub);
      return;
    }
    aclnnBinaryGetWorkspaceSizeFn plan = nullptr;
    aclnnRunFn run = nullptr;
    const char* name = nullptr;
    switch (op) {
      case H2_BINARY_MUL: plan = nn.aclnnMulWorkspace, run = nn.aclnnMul, name = "aclnnMul"; break;
      case H2_BINARY_DIV: plan = nn.aclnnDivWorkspace, run = nn.aclnnDiv, name = "aclnnDiv"; break;
      case H2_BINARY_POW:
        plan = nn.aclnnPowTensorTensorWorkspace, run = nn.aclnnPowTensorTensor, name = "aclnnPowTensorTensor";
        break;
      case H2_BINARY_MAXIMUM: plan = nn.aclnnMaximumWorkspace, run = nn.aclnnMaximum, name = "aclnnMaximum"; break;
      case H2_BINARY_MINIMUM: plan = nn.aclnnMinimumWorkspace, run = nn.aclnnMinimum, name = "aclnnMinimum"; break;
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown binary op " + std::to_string(op));
    }
    run_aclnn(
        *stream, name,
        [&](uint64_t* size, aclOpExecutor** executor) { return plan(a.get(), b.get(), y.get(), size, executor); }, run);
  });
}

namespace {

// scalar / x: the scalar in a one-element scratch tensor of x's type, broadcast by aclnnDiv.
void scalar_divided_by(Stream& stream, const H2_BinaryScalarArgs& args) {
  TensorOps ops{stream};
  ScratchTensor numerator(stream, args.x.dtype, {});
  ops.fill(numerator.tensor, args.scalar);
  ops.binary("aclnnDiv", ops.nn.aclnnDivWorkspace, ops.nn.aclnnDiv, args.y, numerator.tensor, args.x);
}

}  // namespace

H2_Status op_binary_scalar(H2_Stream* handle, const H2_BinaryScalarArgs* args) {
  return guarded("binary_scalar", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    const uint32_t op = args->op;
    const bool first = args->scalar_first != 0;
    if (op == H2_BINARY_DIV && first) return scalar_divided_by(*stream, *args);
    AclTensor x(args->x), y(args->y);
    AclScalar s(args->scalar), one(1.0);
    if (op == H2_BINARY_ADD || op == H2_BINARY_SUB) {
      // x + s, s + x, x - s (Subs) and s - x (Rsubs), each with alpha 1.
      const auto plan = op == H2_BINARY_ADD ? nn.aclnnAddsWorkspace
                        : first             ? nn.aclnnRsubsWorkspace
                                            : nn.aclnnSubsWorkspace;
      const auto run = op == H2_BINARY_ADD ? nn.aclnnAdds : first ? nn.aclnnRsubs : nn.aclnnSubs;
      run_aclnn(
          *stream,
          op == H2_BINARY_ADD ? "aclnnAdds"
          : first             ? "aclnnRsubs"
                              : "aclnnSubs",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return plan(x.get(), s.get(), one.get(), y.get(), size, executor);
          },
          run);
      return;
    }
    if (op == H2_BINARY_POW && first) {
      run_aclnn(
          *stream, "aclnnPowScalarTensor",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnPowScalarTensorWorkspace(s.get(), x.get(), y.get(), size, executor);
          },
          nn.aclnnPowScalarTensor);
      return;
    }
    aclnnScalarGetWorkspaceSizeFn plan = nullptr;
    aclnnRunFn run = nullptr;
    const char* name = nullptr;
    switch (op) {  // the rest commute, or have the scalar second
      case H2_BINARY_MUL: plan = nn.aclnnMulsWorkspace, run = nn.aclnnMuls, name = "aclnnMuls"; break;
      case H2_BINARY_DIV: plan = nn.aclnnDivsWorkspace, run = nn.aclnnDivs, name = "aclnnDivs"; break;
      case H2_BINARY_POW:
        plan = nn.aclnnPowTensorScalarWorkspace, run = nn.aclnnPowTensorScalar, name = "aclnnPowTensorScalar";
        break;
      case H2_BINARY_MAXIMUM: plan = nn.aclnnClampMinWorkspace, run = nn.aclnnClampMin, name = "aclnnClampMin"; break;
      case H2_BINARY_MINIMUM: plan = nn.aclnnClampMaxWorkspace, run = nn.aclnnClampMax, name = "aclnnClampMax"; break;
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown binary op " + std::to_string(op));
    }
    run_aclnn(
        *stream, name,
        [&](uint64_t* size, aclOpExecutor** executor) { return plan(x.get(), s.get(), y.get(), size, executor); }, run);
  });
}

H2_Status op_unary(H2_Stream* handle, const H2_UnaryArgs* args) {
  return guarded("unary", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), y(args->y);
    aclnnUnaryGetWorkspaceSizeFn plan = nullptr;
    aclnnRunFn run = nullptr;
    const char* name = nullptr;
    switch (args->op) {
      case H2_UNARY_EXP: plan = nn.aclnnExpWorkspace, run = nn.aclnnExp, name = "aclnnExp"; break;
      case H2_UNARY_LOG: plan = nn.aclnnLogWorkspace, run = nn.aclnnLog, name = "aclnnLog"; break;
      case H2_UNARY_SQRT: plan = nn.aclnnSqrtWorkspace, run = nn.aclnnSqrt, name = "aclnnSqrt"; break;
      case H2_UNARY_RSQRT: plan = nn.aclnnRsqrtWorkspace, run = nn.aclnnRsqrt, name = "aclnnRsqrt"; break;
      case H2_UNARY_NEG: plan = nn.aclnnNegWorkspace, run = nn.aclnnNeg, name = "aclnnNeg"; break;
      case H2_UNARY_RECIPROCAL:
        plan = nn.aclnnReciprocalWorkspace, run = nn.aclnnReciprocal, name = "aclnnReciprocal";
        break;
      default: fail(H2_STATUS_INVALID_ARGUMENT, "unknown unary op " + std::to_string(args->op));
    }
    run_aclnn(
        *stream, name, [&](uint64_t* size, aclOpExecutor** executor) { return plan(x.get(), y.get(), size, executor); },
        run);
  });
}

}  // namespace h2::ascend
