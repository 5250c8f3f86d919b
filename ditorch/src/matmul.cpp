// Matrix products on h2::ops::gemm: mm, addmm (linear's forward) and bmm (batched attention
// products), functional and out= forms. Transposed operands stay views: the gemm reads any strides.
#include "kernels.hpp"

namespace h2torch {
namespace {

void check_product(const char* op, const at::Tensor& a, const at::Tensor& b, int64_t rank) {
  TORCH_CHECK(a.dim() == rank && b.dim() == rank, op, ": expected ", rank, "-D tensors, got ", a.sizes(), " and ",
              b.sizes());
  TORCH_CHECK(a.size(-1) == b.size(-2), op, ": shapes cannot be multiplied (", a.sizes(), " and ", b.sizes(), ")");
  TORCH_CHECK(rank == 2 || a.size(0) == b.size(0), op, ": batch sizes differ (", a.sizes(), " and ", b.sizes(), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": expected one dtype, got ", a.scalar_type(), " and ",
              b.scalar_type());
  check_floating(op, a);
}

// out = alpha * a @ b (+ beta * out when beta is not 0).
at::Tensor& product_into(const char* op, const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int64_t rank,
                         double alpha = 1, double beta = 0) {
  const int index = one_device(op, {&a, &b, &out});
  check_product(op, a, b, rank);
  const c10::DeviceGuard guard(h2_device(index));
  std::vector<int64_t> shape = a.sizes().vec();
  shape.back() = b.size(-1);
  resize_out(out, shape);
  if (out.numel() == 0) return out;
  h2::ops::GemmOptions options;
  options.alpha = alpha;
  options.beta = beta;
  if (a.size(-1) == 0) {  // an empty sum: beta * C alone
    h2::ops::binary(stream(index), h2::ops::BinaryOp::mul, as_h2(out), beta, as_h2(out));
    return out;
  }
  h2::ops::gemm(stream(index), as_h2(a), as_h2(b), as_h2(out), options);
  return out;
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return product_into("mm", self, mat2, out, 2);
}
// The product's result, made at its final shape (a resize after the fact costs a second tensor).
at::Tensor product_result(const at::Tensor& a, const at::Tensor& b) {
  c10::DimVector shape(a.sizes());
  if (!shape.empty() && b.dim() > 0) shape.back() = b.size(-1);
  return at::empty(shape, a.options());
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = product_result(self, mat2);
  return h2torch::mm_out(self, mat2, out);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  return product_into("bmm", self, mat2, out, 3);
}
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = product_result(self, mat2);
  return h2torch::bmm_out(self, mat2, out);
}

// beta * self + alpha * (mat1 @ mat2): self broadcast into out, then one gemm with beta.
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  const int index = one_device("addmm", {&self, &mat1, &mat2, &out});
  check_product("addmm", mat1, mat2, 2);
  const std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  const bool in_place = out.is_same(self);
  TORCH_CHECK(!in_place || self.sizes() == c10::IntArrayRef(shape), "addmm_: self ", self.sizes(),
              " is not the product's shape ", c10::IntArrayRef(shape));
  const double b = beta.toDouble();
  resize_out(out, shape);
  if (b != 0 && !in_place && out.numel() > 0) {
    const c10::DeviceGuard guard(h2_device(index));
    h2::ops::copy(stream(index), operand(self, out.scalar_type(), shape), as_h2(out));
  }
  return product_into("addmm", mat1, mat2, out, 2, alpha.toDouble(), b);
}
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor out = product_result(mat1, mat2);
  return h2torch::addmm_out(self, mat1, mat2, beta, alpha, out);
}
at::Tensor& addmm_inplace(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                          const c10::Scalar& alpha) {
  return h2torch::addmm_out(self, mat1, mat2, beta, alpha, self);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  H2_IMPL(m, "mm", mm);
  H2_IMPL(m, "mm.out", mm_out);
  H2_IMPL(m, "bmm", bmm);
  H2_IMPL(m, "bmm.out", bmm_out);
  H2_IMPL(m, "addmm", addmm);
  H2_IMPL(m, "addmm_", addmm_inplace);
  H2_IMPL(m, "addmm.out", addmm_out);
}

}  // namespace h2torch
