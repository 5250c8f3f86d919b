// The vocabulary an accelerator plugin's composed operators are written in: each call is one device
// operation (or a few) enqueued on the plugin's stream, on H2_Tensor views of any strides (a size-1 or
// stride-0 dimension broadcasts). A plugin implements it on its vendor's operator library (Ascend on
// aclnn, MLU on CNNL), and the operators its library lacks, or cannot do exactly as the ABI says
// (plugins/common/composed/composed_ops.hpp), are written once here on top of it. Nothing in it reads
// device data back to the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "h2/plugin_abi.h"

namespace h2::plugin {

class DeviceMath {
 public:
  virtual ~DeviceMath() = default;

  // Contiguous device memory of `dtype` and `shape`, ordered by the stream; freed in stream order when
  // the returned object goes.
  struct Scratch {
    virtual ~Scratch() = default;
    H2_Tensor tensor{};
  };
  virtual std::unique_ptr<Scratch> scratch(uint32_t dtype, const std::vector<int64_t>& shape) = 0;

  // y = x converted to y's dtype (as the ABI's copy).
  virtual void copy(const H2_Tensor& y, const H2_Tensor& x) = 0;
  virtual void fill(const H2_Tensor& y, double value) = 0;
  // y[i] = start + i * step for the 1-D y.
  virtual void arange(const H2_Tensor& y, double start, double step) = 0;
  // Host bytes into the device tensor `to`, ordered on the stream; the host buffer may be reused when
  // the call returns.
  virtual void upload(const H2_Tensor& to, const void* host, size_t bytes) = 0;

  // With a scalar: y = x * s, y = x / s, y = x + s. The scalar stays FP64 until it meets the data.
  virtual void scale(const H2_Tensor& y, const H2_Tensor& x, double s) = 0;
  virtual void divide(const H2_Tensor& y, const H2_Tensor& x, double s) = 0;
  virtual void shift(const H2_Tensor& y, const H2_Tensor& x, double s) = 0;
  // y = a + alpha * b.
  virtual void add(const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha) = 0;
  // y = a (op) b for H2_BINARY_MUL, DIV, MAXIMUM, MINIMUM and POW.
  virtual void binary(uint32_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b) = 0;
  enum class Unary { exp, log, sqrt, reciprocal, abs };
  virtual void unary(Unary op, const H2_Tensor& y, const H2_Tensor& x) = 0;
  // y = x ^ p and y = min(x, limit) with scalar p and limit.
  virtual void power(const H2_Tensor& y, const H2_Tensor& x, double p) = 0;
  virtual void clamp_max(const H2_Tensor& y, const H2_Tensor& x, double limit) = 0;

  // BOOL masks: mask = x == value, mask = x > value, mask = x is NaN or infinite.
  virtual void equal(const H2_Tensor& mask, const H2_Tensor& x, double value) = 0;
  virtual void greater(const H2_Tensor& mask, const H2_Tensor& x, double value) = 0;
  virtual void not_finite(const H2_Tensor& mask, const H2_Tensor& x) = 0;
  // y = cond ? a : b; y = mask ? value : y (in place).
  virtual void where(const H2_Tensor& y, const H2_Tensor& cond, const H2_Tensor& a, const H2_Tensor& b) = 0;
  virtual void masked_fill(const H2_Tensor& y, const H2_Tensor& mask, double value) = 0;

  // y = the sum, mean or maximum of x over `dims` (kept with size 1 when `keep`); a reduction over
  // every dimension without `keep` gives the 0-D y.
  enum class Reduce { sum, mean, max };
  virtual void reduce(Reduce op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims,
                      bool keep) = 0;

  // torch.gather and torch.scatter_add_ (y read and written).
  virtual void gather(const H2_Tensor& y, const H2_Tensor& x, int64_t dim, const H2_Tensor& index) = 0;
  virtual void scatter_add(const H2_Tensor& y, int64_t dim, const H2_Tensor& index, const H2_Tensor& src) = 0;

  // c = alpha * a @ b for 3-D a, b, c of one dtype (a batch of 1 broadcasts); c is not read. FP32
  // stays FP32 throughout; 16-bit inputs accumulate in FP32.
  virtual void bmm(const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b, double alpha) = 0;
};

}  // namespace h2::plugin
