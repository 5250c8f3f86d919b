// The Ascend plugin's operator table: every operator of the ABI, each mapped onto aclnn operators
// (one where aclnn has it, composed where it does not), for FLOAT, FLOAT16 and BFLOAT16, any strides,
// deterministic (every reduction the plugin asks for sums in a fixed order: aclnn's scatter and
// embedding backward are deterministic on A2 when the context's ACL_OPT_DETERMINISTIC is set, and the
// emulated runtime always is).
#include "op_table.hpp"

#include "../runtime.hpp"
#include "op_slots.hpp"

namespace h2::ascend {
namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return h2::plugin::guarded("capability", [&] {
    h2::plugin::require(capability, "capability");
    runtime().check_device(device);
    h2::plugin::check_capability_query(op, capability);
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
    .rotary = op_rotary,
    .cross_entropy = op_cross_entropy,
    .cross_entropy_backward = op_cross_entropy_backward,
    .attention = op_attention,
    .attention_backward = op_attention_backward,
    .dropout = op_dropout,
    .uniform = op_uniform,
    .normal = op_normal,
    .adamw = op_adamw,
    .grad_norm = op_grad_norm,
    .clip_by_norm = op_clip_by_norm,
    .unscale = op_unscale,
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
