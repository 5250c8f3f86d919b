// DeviceMath (plugins/common/composed/device_math.hpp) on aclnn: what the operators written once for
// every accelerator plugin (AdamW and the gradient utilities, cross-entropy, the random operators,
// rotary, the causal mask) run on in the Ascend plugin. Each call is one aclnn operator (TensorOps).
#pragma once

#include "composed_ops.hpp"
#include "device_math.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

class AclMath : public h2::plugin::DeviceMath {
 public:
  explicit AclMath(Stream& stream) : ops_{stream} { runtime().bind(stream.device); }
  explicit AclMath(H2_Stream* handle) : AclMath(runtime().stream(handle)) {}

  std::unique_ptr<Scratch> scratch(uint32_t dtype, const std::vector<int64_t>& shape) override;
  void copy(const H2_Tensor& y, const H2_Tensor& x) override { copy_tensor(ops_.stream, y, x); }
  void fill(const H2_Tensor& y, double value) override { ops_.fill(y, value); }
  void arange(const H2_Tensor& y, double start, double step) override { ops_.arange(y, start, step); }
  void upload(const H2_Tensor& to, const void* host, size_t bytes) override;
  void scale(const H2_Tensor& y, const H2_Tensor& x, double s) override { ops_.muls(y, x, s); }
  void divide(const H2_Tensor& y, const H2_Tensor& x, double s) override { ops_.divs(y, x, s); }
  void shift(const H2_Tensor& y, const H2_Tensor& x, double s) override { ops_.adds(y, x, s); }
  void add(const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha) override;
  void binary(uint32_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b) override;
  void unary(Unary op, const H2_Tensor& y, const H2_Tensor& x) override;
  void power(const H2_Tensor& y, const H2_Tensor& x, double p) override;
  void clamp_max(const H2_Tensor& y, const H2_Tensor& x, double limit) override;
  void equal(const H2_Tensor& mask, const H2_Tensor& x, double value) override;
  void greater(const H2_Tensor& mask, const H2_Tensor& x, double value) override;
  void not_finite(const H2_Tensor& mask, const H2_Tensor& x) override;
  void where(const H2_Tensor& y, const H2_Tensor& cond, const H2_Tensor& a, const H2_Tensor& b) override {
    ops_.where(y, cond, a, b);
  }
  void masked_fill(const H2_Tensor& y, const H2_Tensor& mask, double value) override {
    ops_.masked_fill(y, mask, value);
  }
  void reduce(Reduce op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep) override;
  void gather(const H2_Tensor& y, const H2_Tensor& x, int64_t dim, const H2_Tensor& index) override {
    ops_.gather(y, x, dim, index);
  }
  void scatter_add(const H2_Tensor& y, int64_t dim, const H2_Tensor& index, const H2_Tensor& src) override {
    ops_.scatter_add(y, dim, index, src);
  }
  void bmm(const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b, double alpha) override {
    ops_.bmm(c, a, b, alpha);
  }

 private:
  explicit AclMath(std::shared_ptr<Stream> stream) : held_(std::move(stream)), ops_{*held_} {
    runtime().bind(held_->device);
  }
  std::shared_ptr<Stream> held_;  // the stream, when made from its handle
  TensorOps ops_;
};

// Writes the BOOL [rows, cols] causal mask of a softmax or attention (composed::causal_mask).
inline void write_causal_mask(Stream& stream, const H2_Tensor& mask) {
  AclMath math(stream);
  h2::plugin::composed::causal_mask(math, mask);
}

}  // namespace h2::ascend
