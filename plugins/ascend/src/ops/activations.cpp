// gelu, silu and their backwards on aclnnGeluV2, aclnnGeluBackwardV2, aclnnSilu and aclnnSiluBackward;
// swiglu and its backward composed from them and aclnnMul (aclnnSwiGlu takes gate and up as the two
// halves of one tensor, the ABI as two tensors).
#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

H2_Status op_gelu(H2_Stream* handle, const H2_GeluArgs* args) {
  return guarded("gelu", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), y(args->y);
    const int64_t approximate = args->approximate != 0 ? 1 : 0;
    run_aclnn(
        *stream, "aclnnGeluV2",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnGeluV2Workspace(x.get(), approximate, y.get(), size, executor);
        },
        nn.aclnnGeluV2);
  });
}

H2_Status op_gelu_backward(H2_Stream* handle, const H2_GeluBackwardArgs* args) {
  return guarded("gelu_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), dy(args->dy), dx(args->dx);
    char none[] = "none", tanh_form[] = "tanh";
    char* approximate = args->approximate != 0 ? tanh_form : none;
    run_aclnn(
        *stream, "aclnnGeluBackwardV2",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnGeluBackwardV2Workspace(dy.get(), x.get(), approximate, dx.get(), size, executor);
        },
        nn.aclnnGeluBackwardV2);
  });
}

H2_Status op_silu(H2_Stream* handle, const H2_SiluArgs* args) {
  return guarded("silu", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), y(args->y);
    run_aclnn(
        *stream, "aclnnSilu",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnSiluWorkspace(x.get(), y.get(), size, executor);
        },
        nn.aclnnSilu);
  });
}

H2_Status op_silu_backward(H2_Stream* handle, const H2_SiluBackwardArgs* args) {
  return guarded("silu_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), dy(args->dy), dx(args->dx);
    run_aclnn(
        *stream, "aclnnSiluBackward",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnSiluBackwardWorkspace(dy.get(), x.get(), dx.get(), size, executor);
        },
        nn.aclnnSiluBackward);
  });
}

H2_Status op_swiglu(H2_Stream* handle, const H2_SwigluArgs* args) {
  return guarded("swiglu", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    ScratchTensor activated(*stream, args->gate.dtype, shape_of(args->gate));
    ops.unary("aclnnSilu", ops.nn.aclnnSiluWorkspace, ops.nn.aclnnSilu, activated.tensor, args->gate);
    ops.binary("aclnnMul", ops.nn.aclnnMulWorkspace, ops.nn.aclnnMul, args->y, activated.tensor, args->up);
  });
}

// dgate = silu'(gate) * dy * up, dup = silu(gate) * dy.
H2_Status op_swiglu_backward(H2_Stream* handle, const H2_SwigluBackwardArgs* args) {
  return guarded("swiglu_backward", [&] {
    auto stream = runtime().stream(handle);
    TensorOps ops{*stream};
    const AclnnLibrary& nn = ops.nn;
    ScratchTensor through_up(*stream, args->dy.dtype, shape_of(args->dy));
    ScratchTensor activated(*stream, args->gate.dtype, shape_of(args->gate));
    ops.binary("aclnnMul", nn.aclnnMulWorkspace, nn.aclnnMul, through_up.tensor, args->dy, args->up);
    ops.unary("aclnnSilu", nn.aclnnSiluWorkspace, nn.aclnnSilu, activated.tensor, args->gate);
    {
      AclTensor dy_up(through_up.tensor), gate(args->gate), dgate(args->dgate);
      run_aclnn(
          *stream, "aclnnSiluBackward",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnSiluBackwardWorkspace(dy_up.get(), gate.get(), dgate.get(), size, executor);
          },
          nn.aclnnSiluBackward);
    }
    ops.binary("aclnnMul", nn.aclnnMulWorkspace, nn.aclnnMul, args->dup, activated.tensor, args->dy);
  });
}

}  // namespace h2::ascend
