// The CUDA plugin's operator table: every operator of ABI 1.1 for F32, F16 and (from sm_80) BF16
// float tensors, any strides, deterministic (fixed reduction orders, no float atomics; cuBLAS with a
// per-stream workspace is run-to-run reproducible on one GPU model).
#include "op_table.hpp"

#include <cuda_runtime.h>

#include "../cuda_error.hpp"
#include "../runtime.hpp"

namespace h2::cuda {

namespace {

H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* capability) {
  return guarded("capability", [&] {
    if (capability == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, "capability is NULL");
    runtime().check_device(device);
    if (op < 1 || op > H2_OP_COUNT_1_1) fail(H2_STATUS_UNSUPPORTED, "unknown operator " + std::to_string(op));
    if (capability->struct_size < H2_OP_CAPABILITY_SIZE_1_1)
      fail(H2_STATUS_INVALID_ARGUMENT, "capability->struct_size is smaller than ABI 1.1's");
    int major = 0;
    H2_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    capability->dtypes = (1u << H2_DTYPE_F32) | (1u << H2_DTYPE_F16) | (major >= 8 ? (1u << H2_DTYPE_BF16) : 0u);
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

}  // namespace h2::cuda
