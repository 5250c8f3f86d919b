// Emulated aclnn matrix products as the Cube unit computes them (Atlas A2): FP16 and BF16 inputs
// multiply exactly and accumulate in FP32; FP32 inputs stay FP32 under KEEP_DTYPE, but are rounded to
// HFLOAT32 (10 mantissa bits) under ALLOW_FP32_DOWN_PRECISION or USE_HF32 and to FP16 under USE_FP16,
// so a plugin that asks for them loses precision here as on the chip. For FP16/BF16 outputs the
// scaling and bias addition round to the output type at each step unless cubeMathType is
// USE_FP32_ADD. The accumulators live in the workspace the operator asks for.
#include <cstring>
#include <type_traits>
#include <vector>

#include "tensor_access.hpp"

namespace ascend_emulator {
namespace {

float to_hf32(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return value;  // infinity, NaN
  bits = (bits + 0xfffu + ((bits >> 13) & 1u)) & ~0x1fffu;
  float rounded;
  std::memcpy(&rounded, &bits, 4);
  return rounded;
}

float round_to(aclDataType dtype, float value) {
  if (dtype == ACL_FLOAT16) return half_to_float(float_to_half(value));
  if (dtype == ACL_BF16) return bf16_to_float(float_to_bf16(value));
  return value;
}

void check_cube_math_type(int8_t cube, aclDataType dtype) {
  if (cube < KEEP_DTYPE || cube > USE_FP32_ADD)
    throw Error(ACLNN_ERR_PARAM_INVALID, "cubeMathType " + std::to_string(cube) + " is not one of 0..4");
  if (cube == USE_FP16 && dtype == ACL_BF16)
    throw Error(ACLNN_ERR_PARAM_INVALID, "cubeMathType USE_FP16 is not supported for BFLOAT16");
  if (cube == USE_HF32 && dtype != ACL_FLOAT)
    throw Error(ACLNN_ERR_PARAM_INVALID, "cubeMathType USE_HF32 needs FLOAT inputs");
}

// How the Cube unit reads an FP32 input element under `cube`.
float cube_input(aclDataType dtype, int8_t cube, double value) {
  const float x = static_cast<float>(value);
  if (dtype != ACL_FLOAT) return x;
  if (cube == ALLOW_FP32_DOWN_PRECISION || cube == USE_HF32) return to_hf32(x);
  if (cube == USE_FP16) return round_to(ACL_FLOAT16, x);
  return x;
}

struct Product {
  aclTensor self, a, b, out;
  bool read_self;
  double beta, alpha;
  int8_t cube;
  int64_t batch, m, k, n;
};

void run_product(const Product& p, float* accumulators) {
  const std::vector<int64_t> out_shape = p.out.view;
  const Elements out(p.out);
  const Elements a(p.a);
  const Elements b(p.b);
  const bool batched = p.a.view.size() == 3;
  const int64_t a_batch = batched ? p.a.view[0] : 1;
  const int64_t b_batch = batched ? p.b.view[0] : 1;
  const bool exact_add = p.out.dtype == ACL_FLOAT || p.cube == USE_FP32_ADD;
  for (int64_t batch = 0; batch < p.batch; ++batch) {
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) accumulators[i * p.n + j] = 0.0f;
    const int64_t a_base = (a_batch == 1 ? 0 : batch) * p.m * p.k;
    const int64_t b_base = (b_batch == 1 ? 0 : batch) * p.k * p.n;
    // The operands as the Cube unit reads them, then the products in FP32, k in order.
    std::vector<float> lhs(static_cast<size_t>(p.m * p.k)), rhs(static_cast<size_t>(p.k * p.n));
    a.load_range(a_base, p.m * p.k, lhs.data());
    b.load_range(b_base, p.k * p.n, rhs.data());
    for (float& x : lhs) x = cube_input(p.a.dtype, p.cube, x);
    for (float& x : rhs) x = cube_input(p.b.dtype, p.cube, x);
    for (int64_t i = 0; i < p.m; ++i) {
      float* row = accumulators + i * p.n;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const float x = lhs[static_cast<size_t>(i * p.k + kk)];
        const float* b_row = rhs.data() + kk * p.n;
        for (int64_t j = 0; j < p.n; ++j) row[j] += x * b_row[j];
      }
    }
    const Elements self(p.read_self ? p.self : p.out, out_shape);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t index = (batch * p.m + i) * p.n + j;
        const float product = accumulators[i * p.n + j];
        const float alpha = static_cast<float>(p.alpha);
        const float beta = static_cast<float>(p.beta);
        float result;
        if (exact_add) {
          result = p.read_self ? beta * static_cast<float>(self.load(index)) + alpha * product : alpha * product;
        } else {
          const aclDataType t = p.out.dtype;
          const float scaled = round_to(t, alpha * round_to(t, product));
          result =
              p.read_self ? round_to(t, round_to(t, beta * static_cast<float>(self.load(index))) + scaled) : scaled;
        }
        out.store(index, result);
      }
  }
}

aclnnStatus plan_product(const char* op, uint64_t* workspace_size, aclOpExecutor** executor, const aclTensor* self,
                         const aclTensor* a, const aclTensor* b, const aclScalar* beta, const aclScalar* alpha,
                         const aclTensor* out, int8_t cube, size_t rank) {
  // The accumulators of one batch: m * n FP32 values.
  uint64_t bytes = 0;
  if (a && b && a->view.size() == rank && b->view.size() == rank)
    bytes = static_cast<uint64_t>(a->view[rank - 2] * b->view[rank - 1]) * sizeof(float);
  return plan_operator(op, workspace_size, executor, bytes, [&]() -> std::function<void(void*)> {
    check_tensor(a, "mat1");
    check_tensor(b, "mat2");
    check_tensor(out, "out");
    if (beta == nullptr || alpha == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "beta or alpha is NULL");
    if (a->view.size() != rank || b->view.size() != rank || out->view.size() != rank)
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + " takes " + std::to_string(rank) + "-D matrices");
    if (a->dtype != b->dtype || a->dtype != out->dtype ||
        !(a->dtype == ACL_FLOAT || a->dtype == ACL_FLOAT16 || a->dtype == ACL_BF16))
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": the matrices are " + dtype_name(a->dtype) + ", " +
                                               dtype_name(b->dtype) + " and " + dtype_name(out->dtype) +
                                               " (FLOAT, FLOAT16 or BFLOAT16, all alike)");
    check_cube_math_type(cube, a->dtype);
    Product p{{}, *a, *b, *out, beta->value != 0.0, beta->value, alpha->value, cube, 1, 0, 0, 0};
    p.m = a->view[rank - 2];
    p.k = a->view[rank - 1];
    p.n = b->view[rank - 1];
    if (b->view[rank - 2] != p.k)
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": mat1 " + shape_text(a->view) + " and mat2 " +
                                               shape_text(b->view) + " do not multiply");
    if (rank == 3) {
      p.batch = out->view[0];
      for (const aclTensor* t : {a, b})
        if (t->view[0] != p.batch && t->view[0] != 1)
          throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": batch " + std::to_string(t->view[0]) +
                                                   " neither matches " + std::to_string(p.batch) + " nor is 1");
    }
    if (out->view[rank - 2] != p.m || out->view[rank - 1] != p.n)
      throw Error(ACLNN_ERR_PARAM_INVALID,
                  std::string(op) + ": out " + shape_text(out->view) + " is not the product's shape");
    if (p.read_self) {
      check_tensor(self, "self");
      if (self->dtype != out->dtype || !broadcasts(self->view, out->view))
        throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": self must be out's type and broadcast to its shape");
      p.self = *self;
    }
    return [p](void* workspace) { run_product(p, static_cast<float*>(workspace)); };
  });
}

}  // namespace
}  // namespace ascend_emulator

using namespace ascend_emulator;
#define EXPORT extern "C" ASCEND_EMULATOR_EXPORT

EXPORT aclnnStatus aclnnInplaceAddmmGetWorkspaceSize(const aclTensor* self_ref, const aclTensor* mat1,
                                                     const aclTensor* mat2, const aclScalar* beta,
                                                     const aclScalar* alpha, int8_t cube_math_type,
                                                     uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_product("aclnnInplaceAddmm", workspace_size, executor, self_ref, mat1, mat2, beta, alpha, self_ref,
                      cube_math_type, 2);
}
EXPORT aclnnStatus aclnnInplaceAddmm(void* workspace, uint64_t workspace_size, aclOpExecutor* executor,
                                     aclrtStream stream) {
  return run_operator("aclnnInplaceAddmm", workspace, workspace_size, executor, stream);
}

EXPORT aclnnStatus aclnnBaddbmmGetWorkspaceSize(const aclTensor* self, const aclTensor* batch1, const aclTensor* batch2,
                                                const aclScalar* beta, const aclScalar* alpha, aclTensor* out,
                                                int8_t cube_math_type, uint64_t* workspace_size,
                                                aclOpExecutor** executor) {
  return plan_product("aclnnBaddbmm", workspace_size, executor, self, batch1, batch2, beta, alpha, out, cube_math_type,
                      3);
}
EXPORT aclnnStatus aclnnBaddbmm(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, aclrtStream stream) {
  return run_operator("aclnnBaddbmm", workspace, workspace_size, executor, stream);
}

static_assert(std::is_same_v<decltype(&aclnnInplaceAddmmGetWorkspaceSize), aclnnInplaceAddmmGetWorkspaceSizeFn>);
static_assert(std::is_same_v<decltype(&aclnnBaddbmmGetWorkspaceSize), aclnnBaddbmmGetWorkspaceSizeFn>);
static_assert(std::is_same_v<decltype(&aclnnInplaceAddmm), aclnnRunFn>);
static_assert(std::is_same_v<decltype(&aclnnBaddbmm), aclnnRunFn>);
