// The MLU plugin's vocabulary of CNNL calls on whole tensors: DeviceMath (plugins/common/composed) for
// the operators written once for every accelerator plugin, plus the calls the plugin's own operators
// use. CNNL's elementwise operators take one dtype for their inputs and output and compute in FP32
// inside; where the ABI mixes dtypes (an F32 statistic of F16 data, a scalar), the data is widened to
// F32 in scratch memory first and rounded once at the end.
#pragma once

#include "cnnl_call.hpp"
#include "composed_ops.hpp"
#include "device_math.hpp"

namespace h2::mlu {

class CnnlMath : public h2::plugin::DeviceMath {
 public:
  explicit CnnlMath(Stream& stream) : stream_(stream), cnnl_(runtime().cnnl()), handle_(handle_of(stream)) {}
  explicit CnnlMath(H2_Stream* handle) : CnnlMath(runtime().stream(handle)) {}

  Stream& stream() const { return stream_; }

  // ---- DeviceMath ----
  std::unique_ptr<Scratch> scratch(uint32_t dtype, const std::vector<int64_t>& shape) override;
  void copy(const H2_Tensor& y, const H2_Tensor& x) override;
  void fill(const H2_Tensor& y, double value) override;
  void arange(const H2_Tensor& y, double start, double step) override;
  void upload(const H2_Tensor& to, const void* host, size_t bytes) override;
  void scale(const H2_Tensor& y, const H2_Tensor& x, double s) override { transform(y, x, s, 0.0); }
  void divide(const H2_Tensor& y, const H2_Tensor& x, double s) override;
  void shift(const H2_Tensor& y, const H2_Tensor& x, double s) override { transform(y, x, 1.0, s); }
  void add(const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha) override {
    op_tensor(CNNL_OP_TENSOR_ADD, y, a, b, 1.0, alpha);
  }
  void binary(uint32_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b) override;
  void unary(Unary op, const H2_Tensor& y, const H2_Tensor& x) override;
  void power(const H2_Tensor& y, const H2_Tensor& x, double p) override;
  void clamp_max(const H2_Tensor& y, const H2_Tensor& x, double limit) override;
  void equal(const H2_Tensor& mask, const H2_Tensor& x, double value) override {
    compare(CNNL_LOGIC_OP_EQ, mask, x, value);
  }
  void greater(const H2_Tensor& mask, const H2_Tensor& x, double value) override {
    compare(CNNL_LOGIC_OP_GT, mask, x, value);
  }
  void not_finite(const H2_Tensor& mask, const H2_Tensor& x) override;
  void where(const H2_Tensor& y, const H2_Tensor& cond, const H2_Tensor& a, const H2_Tensor& b) override;
  void masked_fill(const H2_Tensor& y, const H2_Tensor& mask, double value) override;
  void reduce(Reduce op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep) override;
  void gather(const H2_Tensor& y, const H2_Tensor& x, int64_t dim, const H2_Tensor& index) override;
  void scatter_add(const H2_Tensor& y, int64_t dim, const H2_Tensor& index, const H2_Tensor& src) override;
  void bmm(const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b, double alpha) override;

  // ---- CNNL's own ----
  // y = op(x) for an H2_UnaryOp, or kUnaryAbs.
  static constexpr uint32_t kUnaryAbs = 100;
  void elementwise(uint32_t op, const H2_Tensor& y, const H2_Tensor& x);
  // y = op(alpha1 * a, alpha2 * b) for ADD, SUB, MUL; a and b broadcast to y.
  void op_tensor(cnnlOpTensorDesc_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha1,
                 double alpha2);
  // y = alpha * x + beta.
  void transform(const H2_Tensor& y, const H2_Tensor& x, double alpha, double beta);
  // mask (BOOL) = a (op) b, b broadcast; or against a scalar.
  void logic(cnnlLogicOp_t op, const H2_Tensor& mask, const H2_Tensor& a, const H2_Tensor& b);
  void compare(cnnlLogicOp_t op, const H2_Tensor& mask, const H2_Tensor& x, double value);
  // A BOOL copy of a BOOL or U8 mask (CNNL's selection takes BOOL).
  std::unique_ptr<Scratch> bool_mask(const H2_Tensor& mask);
  // y = f(x) or dx = dy * f'(x) for GELU (tanh form with `approximate`) and SILU.
  void activation(cnnlActivationMode_t mode, bool approximate, const H2_Tensor& y, const H2_Tensor& x);
  void activation_backward(cnnlActivationMode_t mode, bool approximate, const H2_Tensor& dx, const H2_Tensor& x,
                           const H2_Tensor& dy);
  // y = the reduction of x over `dims` (op and the kept-rank output as cnnlReduce does), with the
  // position of the first maximum into `indices` (I64 of y's shape) when given.
  void cnnl_reduce(cnnlReduceOp_t op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims,
                   bool keep, const H2_Tensor* indices = nullptr);
  // c = alpha * op(a) op(b) (+ beta * c) for 2-D or batched operands of one dtype; FP32 stays FP32
  // (no TF32), 16-bit data accumulates in FP32.
  void matmul(const H2_Tensor& c, const H2_Tensor& a, bool transpose_a, const H2_Tensor& b, bool transpose_b,
              double alpha, double beta);
  // A tensor of `dtype` holding x's values: x itself when it has that dtype, else a scratch copy.
  H2_Tensor as_dtype(const H2_Tensor& x, uint32_t dtype, std::unique_ptr<Scratch>& holder);

 private:
  // A one-element tensor of `dtype` holding `value`, broadcast to any shape by a 0-D descriptor.
  std::unique_ptr<Scratch> scalar(uint32_t dtype, double value);
  // One cast between dtypes CNNL converts directly, else through F32.
  void cast(const H2_Tensor& y, const H2_Tensor& x);

  explicit CnnlMath(std::shared_ptr<Stream> stream)
      : held_(std::move(stream)), stream_(*held_), cnnl_(runtime().cnnl()), handle_(handle_of(*held_)) {}

  std::shared_ptr<Stream> held_;  // the stream, when made from its handle
  Stream& stream_;
  const CnnlLibrary& cnnl_;
  cnnlHandle_t handle_;
};

}  // namespace h2::mlu
