// gemm on aclnn's matrix operators. Rank 2 is aclnnInplaceAddmm on C, rank 3 aclnnBaddbmm with C as
// both self and out (a batch of 1 broadcasts); transposes are views (swapped strides), never copies.
// cubeMathType: KEEP_DTYPE for FP32, so FP32 is never rounded to HFLOAT32, and USE_FP32_ADD for
// FP16/BF16, so the scaling and the addition of C happen in FP32 and round once. When C is FP32 for
// FP16/BF16 inputs, or a bias is added, the product is taken in FP32 (inputs widened exactly in
// scratch memory, the FP32 accumulation the Cube unit does anyway) and rounded once into C.
#include <optional>

#include "aclnn_call.hpp"
#include "op_slots.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

// A matrix shared by every batch (rank 2 with a rank-3 C) as a batch of one, then op(X).
H2_Tensor operand(H2_Tensor t, bool transpose, uint32_t c_rank) {
  if (t.rank == 2 && c_rank == 3) {
    for (int d = 2; d > 0; --d) {
      t.shape[d] = t.shape[d - 1];
      t.strides[d] = t.strides[d - 1];
    }
    t.shape[0] = 1;
    t.strides[0] = 0;
    t.rank = 3;
  }
  return transpose ? transposed(t) : t;
}

// c = beta * c + alpha * a @ b with a, b and c of one type.
void product(Stream& stream, const H2_Tensor& a, const H2_Tensor& b, const H2_Tensor& c, double alpha, double beta) {
  const AclnnLibrary& nn = runtime().aclnn();
  AclTensor at(a), bt(b), ct(c);
  AclScalar alpha_scalar(alpha), beta_scalar(beta);
  const int8_t cube = c.dtype == H2_DTYPE_F32 ? KEEP_DTYPE : USE_FP32_ADD;
  if (c.rank == 2) {
    run_aclnn(
        stream, "aclnnInplaceAddmm",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnInplaceAddmmWorkspace(ct.get(), at.get(), bt.get(), beta_scalar.get(), alpha_scalar.get(),
                                               cube, size, executor);
        },
        nn.aclnnInplaceAddmm);
  } else {
    run_aclnn(
        stream, "aclnnBaddbmm",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnBaddbmmWorkspace(ct.get(), at.get(), bt.get(), beta_scalar.get(), alpha_scalar.get(), ct.get(),
                                          cube, size, executor);
        },
        nn.aclnnBaddbmm);
  }
}

}  // namespace

H2_Status op_gemm(H2_Stream* handle, const H2_GemmArgs* args) {
  return guarded("gemm", [&] {
    auto stream = runtime().stream(handle);
    const H2_Tensor a = operand(args->a, args->transpose_a != 0, args->c.rank);
    const H2_Tensor b = operand(args->b, args->transpose_b != 0, args->c.rank);
    const H2_Tensor& c = args->c;
    const bool has_bias = args->bias.data != nullptr;
    if (a.dtype == c.dtype && !has_bias) return product(*stream, a, b, c, args->alpha, args->beta);

    // In FP32: the inputs widened, C itself when it is FP32, else an FP32 copy rounded into C last.
    std::optional<ScratchTensor> a32, b32, c32, bias32;
    if (a.dtype != H2_DTYPE_F32) {
      a32.emplace(*stream, H2_DTYPE_F32, shape_of(a));
      copy_tensor(*stream, a32->tensor, a);
      b32.emplace(*stream, H2_DTYPE_F32, shape_of(b));
      copy_tensor(*stream, b32->tensor, b);
    }
    if (c.dtype != H2_DTYPE_F32) {
      c32.emplace(*stream, H2_DTYPE_F32, shape_of(c));
      if (args->beta != 0) copy_tensor(*stream, c32->tensor, c);
    }
    const H2_Tensor& accumulator = c32 ? c32->tensor : c;
    product(*stream, a32 ? a32->tensor : a, b32 ? b32->tensor : b, accumulator, args->alpha, args->beta);
    if (has_bias) {
      if (args->bias.dtype != H2_DTYPE_F32) {
        bias32.emplace(*stream, H2_DTYPE_F32, shape_of(args->bias));
        copy_tensor(*stream, bias32->tensor, args->bias);
      }
      TensorOps{*stream}.add(accumulator, accumulator, bias32 ? bias32->tensor : args->bias, 1.0);
    }
    if (c32) copy_tensor(*stream, c, c32->tensor);
  });
}

}  // namespace h2::ascend
