// The Ascend plugin's operator table: the operators mapped onto aclnn so far (issue 29 maps the rest),
// for FLOAT, FLOAT16 and BFLOAT16, any strides, deterministic (the emulated runtime and the A2's
// matrix operators in their default mode sum in a fixed order). An operator not yet mapped has a
// NULL slot and the capability query says so, so the core names it instead of computing anything.
#include "op_table.hpp"

#include "../runtime.hpp"
#include "op_slots.hpp"

namespace h2::ascend {
namespace {

bool provided(uint32_t op) {
  switch (op) {
    case H2_OP_GEMM:
    case H2_OP_BINARY:
    case H2_OP_BINARY_SCALAR:
    case H2_OP_UNARY:
    case H2_OP_COPY:
    case H2_OP_FILL:
    case H2_OP_WHERE:
    case H2_OP_MASKED_FILL:
    case H2_OP_ARANGE:
    case H2_OP_REDUCE:
    case H2_OP_GELU:
    case H2_OP_GELU_BACKWARD:
    case H2_OP_SILU:
    case H2_OP_SILU_BACKWARD:
    case H2_OP_SWIGLU:
    case H2_OP_SWIGLU_BACKWARD:
    case H2_OP_SOFTMAX:
    case H2_OP_SOFTMAX_BACKWARD:
    case H2_OP_LAYER_NORM:
    case H2_OP_LAYER_NORM_BACKWARD:
    case H2_OP_RMS_NORM:
    case H2_OP_RMS_NORM_BACKWARD:
    case H2_OP_EMBEDDING:
    case H2_OP_EMBEDDING_BACKWARD:
    case H2_OP_INDEX_SELECT:
    case H2_OP_GATHER:
    case H2_OP_SCATTER_ADD: return true;
    default: return false;
  }
}

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return h2::plugin::guarded("capability", [&] {
    h2::plugin::require(capability, "capability");
    runtime().check_device(device);
    h2::plugin::check_capability_query(op, capability);
    if (!provided(op))
      h2::plugin::fail(H2_STATUS_UNSUPPORTED,
                       std::string("the Ascend plugin does not provide ") + h2::plugin::op_name(op) + " yet");
    capability->dtypes = (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (1u << H2_DTYPE_BF16);
    capability->strided_tensors = 1;
    capability->deterministic = 1;
  });
}

}  // namespace

const H2_OpTable kOpTable = {
    .struct_size = sizeof(H2_OpTable),
    .capability = capability,
    .gemm = op_gemm,
    .softmax = op_softmax,
    .softmax_backward = op_softmax_backward,
    .layer_norm = op_layer_norm,
    .layer_norm_backward = op_layer_norm_backward,
    .rms_norm = op_rms_norm,
    .rms_norm_backward = op_rms_norm_backward,
    .gelu = op_gelu,
    .gelu_backward = op_gelu_backward,
    .silu = op_silu,
    .silu_backward = op_silu_backward,
    .swiglu = op_swiglu,
    .swiglu_backward = op_swiglu_backward,
    .embedding = op_embedding,
    .embedding_backward = op_embedding_backward,
    .binary = op_binary,
    .binary_scalar = op_binary_scalar,
    .unary = op_unary,
    .reduce = op_reduce,
    .copy = op_copy,
    .fill = op_fill,
    .arange = op_arange,
    .where = op_where,
    .masked_fill = op_masked_fill,
    .index_select = op_index_select,
    .gather = op_gather,
    .scatter_add = op_scatter_add,
};

}  // namespace h2::ascend
