// gemm on cnnlMatMul_v2 (rank 2) and cnnlBatchMatMulBCast_v2 (rank 3; a batch of 1 or a rank-2
// operand broadcasts), with the compute type FLOAT and TF32 off, so FP32 stays FP32 and FP16/BF16
// accumulate in FP32. Transposes are the descriptor's flags on views, never copies. When C is FP32 for
// 16-bit inputs, or a bias is added, the product is taken in FP32 (inputs widened exactly in scratch
// memory) and C + bias added in FP32 before rounding once into C.
#include "cnnl_math.hpp"
#include "op_table.hpp"

namespace h2::mlu {

H2_Status op_gemm(H2_Stream* handle, const H2_GemmArgs* args) {
  return h2::plugin::guarded("gemm", [&] {
    auto stream = runtime().stream(handle);
    CnnlMath math(*stream);
    const H2_Tensor &a = args->a, &b = args->b, &c = args->c;
    const bool ta = args->transpose_a != 0, tb = args->transpose_b != 0;
    const bool simple = args->bias.data == nullptr && c.dtype == a.dtype;
    if (simple) return math.matmul(c, a, ta, b, tb, args->alpha, args->beta);
    // product = alpha op(a) op(b) in FP32; c = product + beta c + bias, in FP32, rounded once.
    auto product = math.scratch(H2_DTYPE_F32, shape_of(c));
    math.matmul(product->tensor, a, ta, b, tb, args->alpha, 0.0);
    if (args->beta != 0) math.add(product->tensor, product->tensor, c, args->beta);
    if (args->bias.data != nullptr) math.add(product->tensor, product->tensor, args->bias, 1.0);
    math.copy(c, product->tensor);
  });
}

}  // namespace h2::mlu
