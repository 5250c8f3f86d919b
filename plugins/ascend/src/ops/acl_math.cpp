#include "acl_math.hpp"

namespace h2::ascend {
namespace {

struct AclScratch : h2::plugin::DeviceMath::Scratch {
  AclScratch(Stream& stream, uint32_t dtype, const std::vector<int64_t>& shape) : memory(stream, dtype, shape) {
    tensor = memory.tensor;
  }
  ScratchTensor memory;
};

}  // namespace

std::unique_ptr<h2::plugin::DeviceMath::Scratch> AclMath::scratch(uint32_t dtype, const std::vector<int64_t>& shape) {
  return std::make_unique<AclScratch>(ops_.stream, dtype, shape);
}

void AclMath::upload(const H2_Tensor& to, const void* host, size_t bytes) {
  runtime().staging().to_device(ops_.stream.stream, to.data, host, bytes);
}

// a + alpha * b as aclnnAdd, or aclnnSub with -alpha (the same arithmetic: negation is exact).
void AclMath::add(const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha) {
  if (alpha < 0)
    ops_.add(y, a, b, -alpha, true);
  else
    ops_.add(y, a, b, alpha);
}

void AclMath::binary(uint32_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b) {
  const AclnnLibrary& nn = ops_.nn;
  switch (op) {
    case H2_BINARY_MUL: return ops_.binary("aclnnMul", nn.aclnnMulWorkspace, nn.aclnnMul, y, a, b);
    case H2_BINARY_DIV: return ops_.binary("aclnnDiv", nn.aclnnDivWorkspace, nn.aclnnDiv, y, a, b);
    case H2_BINARY_MAXIMUM: return ops_.binary("aclnnMaximum", nn.aclnnMaximumWorkspace, nn.aclnnMaximum, y, a, b);
    case H2_BINARY_MINIMUM: return ops_.binary("aclnnMinimum", nn.aclnnMinimumWorkspace, nn.aclnnMinimum, y, a, b);
    case H2_BINARY_POW:
      return ops_.binary("aclnnPowTensorTensor", nn.aclnnPowTensorTensorWorkspace, nn.aclnnPowTensorTensor, y, a, b);
    default: h2::plugin::fail(H2_STATUS_INTERNAL, "DeviceMath::binary: operation " + std::to_string(op));
  }
}

void AclMath::unary(Unary op, const H2_Tensor& y, const H2_Tensor& x) {
  const AclnnLibrary& nn = ops_.nn;
  switch (op) {
    case Unary::exp: return ops_.unary("aclnnExp", nn.aclnnExpWorkspace, nn.aclnnExp, y, x);
    case Unary::log: return ops_.unary("aclnnLog", nn.aclnnLogWorkspace, nn.aclnnLog, y, x);
    case Unary::sqrt: return ops_.unary("aclnnSqrt", nn.aclnnSqrtWorkspace, nn.aclnnSqrt, y, x);
    case Unary::reciprocal: return ops_.unary("aclnnReciprocal", nn.aclnnReciprocalWorkspace, nn.aclnnReciprocal, y, x);
    case Unary::abs: return ops_.unary("aclnnAbs", nn.aclnnAbsWorkspace, nn.aclnnAbs, y, x);
  }
}

void AclMath::power(const H2_Tensor& y, const H2_Tensor& x, double p) {
  ops_.scalar_op("aclnnPowTensorScalar", ops_.nn.aclnnPowTensorScalarWorkspace, ops_.nn.aclnnPowTensorScalar, y, x, p);
}

void AclMath::clamp_max(const H2_Tensor& y, const H2_Tensor& x, double limit) {
  ops_.scalar_op("aclnnClampMax", ops_.nn.aclnnClampMaxWorkspace, ops_.nn.aclnnClampMax, y, x, limit);
}

void AclMath::equal(const H2_Tensor& mask, const H2_Tensor& x, double value) {
  ops_.scalar_op("aclnnEqScalar", ops_.nn.aclnnEqScalarWorkspace, ops_.nn.aclnnEqScalar, mask, x, value);
}

void AclMath::greater(const H2_Tensor& mask, const H2_Tensor& x, double value) {
  ops_.scalar_op("aclnnGtScalar", ops_.nn.aclnnGtScalarWorkspace, ops_.nn.aclnnGtScalar, mask, x, value);
}

void AclMath::not_finite(const H2_Tensor& mask, const H2_Tensor& x) {
  auto finite = scratch(H2_DTYPE_BOOL, shape_of(mask));
  ops_.unary("aclnnIsFinite", ops_.nn.aclnnIsFiniteWorkspace, ops_.nn.aclnnIsFinite, finite->tensor, x);
  ops_.unary("aclnnLogicalNot", ops_.nn.aclnnLogicalNotWorkspace, ops_.nn.aclnnLogicalNot, mask, finite->tensor);
}

void AclMath::reduce(Reduce op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  switch (op) {
    case Reduce::sum: return ops_.sum(y, x, dims, keep);
    case Reduce::mean: return ops_.sum(y, x, dims, keep, true);
    case Reduce::max: return ops_.amax(y, x, dims, keep);
  }
}

}  // namespace h2::ascend
