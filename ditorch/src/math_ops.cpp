// The first aten operators DiTorch maps onto h2::ops instead of the CPU fallback: elementwise add,
// sub, mul and div (with broadcasting, alpha, a CPU 0-dim operand taken as a scalar, dtype promotion
// as LibTorch's) and the matrix products mm and addmm. Each checks that its tensors are on one H2
// device, as LibTorch's own kernels do.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string>

#include "bridge.hpp"
#include "h2torch/h2torch.hpp"

namespace h2torch {
namespace {

// The index of the H2 device every tensor of `op` is on (CPU 0-dim tensors, which are scalars, aside).
int one_device(const char* op, std::initializer_list<const at::Tensor*> tensors) {
  int index = -1;
  for (const at::Tensor* t : tensors) {
    if (t->device().is_cpu() && t->dim() == 0) continue;
    TORCH_CHECK(t->device().type() == c10::DeviceType::PrivateUse1, op, ": expected all tensors on one H2 device, ",
                "found ", t->device(), " (move it with .to('privateuseone'))");
    TORCH_CHECK(index < 0 || index == t->device().index(), op, ": expected all tensors on one device, found ",
                "privateuseone:", index, " and privateuseone:", t->device().index());
    index = t->device().index();
  }
  return index;
}

// `t` as an H2 tensor of `type` broadcast to `shape` (converted on the device when its dtype differs).
h2::Tensor operand(const at::Tensor& t, c10::ScalarType type, const std::vector<int64_t>& shape) {
  const at::Tensor converted = t.scalar_type() == type ? t : t.to(type);
  return as_h2(converted).expand(shape);
}

at::Tensor binary(const char* name, h2::ops::BinaryOp op, const at::Tensor& self, const at::Tensor& other,
                  const c10::Scalar& alpha) {
  const int index = one_device(name, {&self, &other});
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  c10::ScalarType type = at::result_type(self, other);
  if (op == h2::ops::BinaryOp::div && c10::isIntegralType(type, true)) type = c10::get_default_dtype_as_scalartype();
  // H2's operators compute in floating point: integer arithmetic runs on the CPU, counted.
  if (c10::isIntegralType(type, true)) {
    note_fallback(std::string("aten::") + name + ".Tensor (" + c10::toString(type) + ")");
    const at::Tensor a = self.cpu(), b = other.cpu();
    at::Tensor result = op == h2::ops::BinaryOp::add   ? at::add(a, b, alpha)
                        : op == h2::ops::BinaryOp::sub ? at::sub(a, b, alpha)
                                                       : at::mul(a, b);
    return result.to(c10::Device(c10::DeviceType::PrivateUse1, index));
  }
  const std::vector<int64_t> shape = at::infer_size(self.sizes(), other.sizes());
  at::Tensor out =
      at::empty(shape, self.options().dtype(type).device(c10::Device(c10::DeviceType::PrivateUse1, index)));
  if (out.numel() == 0) return out;
  h2::Stream& s = stream(index);
  const h2::Tensor y = as_h2(out);
  const double factor = alpha.toDouble();
  // A CPU 0-dim tensor is a scalar operand.
  if (other.device().is_cpu()) {
    const h2::Tensor x = operand(self, type, shape);
    h2::ops::binary(s, op, x, other.item().toDouble() * factor, y);
    return out;
  }
  h2::Tensor b = operand(other, type, shape);
  if (factor != 1) {  // alpha scales `other` whichever side is a scalar
    h2::Tensor scaled = h2::Tensor::empty(s, shape, y.dtype());
    h2::ops::binary(s, h2::ops::BinaryOp::mul, b, factor, scaled);
    b = scaled;
  }
  if (self.device().is_cpu())
    h2::ops::binary(s, op, self.item().toDouble(), b, y);
  else
    h2::ops::binary(s, op, operand(self, type, shape), b, y);
  return out;
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return binary("add", h2::ops::BinaryOp::add, self, other, alpha);
}
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return binary("sub", h2::ops::BinaryOp::sub, self, other, alpha);
}
at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return binary("mul", h2::ops::BinaryOp::mul, self, other, 1);
}
at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return binary("div", h2::ops::BinaryOp::div, self, other, 1);
}

at::Tensor mm_kernel(const at::Tensor& self, const at::Tensor& mat2) {
  const int index = one_device("mm", {&self, &mat2});
  TORCH_CHECK(self.dim() == 2 && mat2.dim() == 2, "mm: expected 2-D tensors, got ", self.sizes(), " and ",
              mat2.sizes());
  TORCH_CHECK(self.size(1) == mat2.size(0), "mm: mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "mm: expected one dtype, got ", self.scalar_type(), " and ",
              mat2.scalar_type());
  const c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, index));
  at::Tensor out = at::empty({self.size(0), mat2.size(1)}, self.options());
  if (out.numel() > 0) h2::ops::gemm(stream(index), as_h2(self), as_h2(mat2), as_h2(out));
  return out;
}

// beta * self + alpha * (mat1 @ mat2): self broadcast into the result, then one gemm with beta.
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  at::Tensor out = mm_kernel(mat1, mat2);
  if (out.numel() == 0) return out;
  const int index = one_device("addmm", {&self, &mat1});
  h2::Stream& s = stream(index);
  const h2::Tensor c = as_h2(out);
  h2::ops::copy(s, operand(self, out.scalar_type(), c.shape()), c);
  h2::ops::GemmOptions options;
  options.alpha = alpha.toDouble();
  options.beta = beta.toDouble();
  h2::ops::gemm(s, as_h2(mat1), as_h2(mat2), c, options);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("sub.Tensor", TORCH_FN(sub));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("div.Tensor", TORCH_FN(div));
  m.impl("mm", TORCH_FN(mm_kernel));
  m.impl("addmm", TORCH_FN(addmm));
}

}  // namespace h2torch
