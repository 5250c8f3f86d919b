#include "cnnl_math.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "dtype_size.hpp"

namespace h2::mlu {

using h2::plugin::fail;

namespace {

struct CnnlScratch : h2::plugin::DeviceMath::Scratch {
  CnnlScratch(Stream& stream, uint32_t dtype, const std::vector<int64_t>& shape) : memory(stream, dtype, shape) {
    tensor = memory.tensor;
  }
  ScratchTensor memory;
};

// The cast kinds CNNL converts directly: F32 to and from every other dtype the plugin uses, and
// between the two integer widths.
bool direct_cast(uint32_t from, uint32_t to, cnnlCastDataType_t& cast) {
  struct Kind {
    uint32_t from, to;
    cnnlCastDataType_t cast;
  };
  static constexpr Kind kKinds[] = {
      {H2_DTYPE_F32, H2_DTYPE_F16, CNNL_CAST_FLOAT_TO_HALF},
      {H2_DTYPE_F16, H2_DTYPE_F32, CNNL_CAST_HALF_TO_FLOAT},
      {H2_DTYPE_F32, H2_DTYPE_BF16, CNNL_CAST_FLOAT_TO_BFLOAT16},
      {H2_DTYPE_BF16, H2_DTYPE_F32, CNNL_CAST_BFLOAT16_TO_FLOAT},
      {H2_DTYPE_F32, H2_DTYPE_I32, CNNL_CAST_FLOAT_TO_INT32},
      {H2_DTYPE_I32, H2_DTYPE_F32, CNNL_CAST_INT32_TO_FLOAT},
      {H2_DTYPE_F32, H2_DTYPE_I64, CNNL_CAST_FLOAT_TO_INT64},
      {H2_DTYPE_I64, H2_DTYPE_F32, CNNL_CAST_INT64_TO_FLOAT},
      {H2_DTYPE_F32, H2_DTYPE_BOOL, CNNL_CAST_FLOAT_TO_BOOL},
      {H2_DTYPE_BOOL, H2_DTYPE_F32, CNNL_CAST_BOOL_TO_FLOAT},
      {H2_DTYPE_F32, H2_DTYPE_U8, CNNL_CAST_FLOAT_TO_UINT8},
      {H2_DTYPE_U8, H2_DTYPE_F32, CNNL_CAST_UINT8_TO_FLOAT},
      {H2_DTYPE_I32, H2_DTYPE_I64, CNNL_CAST_INT32_TO_INT64},
      {H2_DTYPE_I64, H2_DTYPE_I32, CNNL_CAST_INT64_TO_INT32},
  };
  for (const Kind& kind : kKinds)
    if (kind.from == from && kind.to == to) {
      cast = kind.cast;
      return true;
    }
  return false;
}

// A view of `t` whose innermost of its last two dimensions is contiguous: t itself, or t's transpose
// with the flag flipped; false when neither is.
bool row_major_operand(H2_Tensor& t, bool& transpose) {
  if (t.rank < 2 || t.strides[t.rank - 1] == 1 || t.shape[t.rank - 1] == 1) return true;
  if (t.strides[t.rank - 2] == 1 || t.shape[t.rank - 2] == 1) {
    t = transposed(t);
    transpose = !transpose;
    return true;
  }
  return false;
}

// `value` as the integer type T the way the ABI converts floats to integers: toward zero, saturated at
// T's range, NaN to 0 (a plain cast of an out-of-range double is undefined).
template <typename T>
T saturated(double value) {
  if (std::isnan(value)) return 0;
  if (value <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  if (value >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(value);
}

void set_attribute(const CnnlLibrary& cnnl, cnnlMatMulDescriptor_t desc, cnnlMatMulDescAttribute_t attribute,
                   int32_t value) {
  H2_CNNL(cnnl, cnnlSetMatMulDescAttr, desc, attribute, &value, sizeof value);
}

}  // namespace

std::unique_ptr<h2::plugin::DeviceMath::Scratch> CnnlMath::scratch(uint32_t dtype, const std::vector<int64_t>& shape) {
  return std::make_unique<CnnlScratch>(stream_, dtype, shape);
}

std::unique_ptr<h2::plugin::DeviceMath::Scratch> CnnlMath::scalar(uint32_t dtype, double value) {
  auto s = scratch(dtype, {1});
  fill(s->tensor, value);
  s->tensor.rank = 0;  // broadcasts to any shape
  return s;
}

H2_Tensor CnnlMath::as_dtype(const H2_Tensor& x, uint32_t dtype, std::unique_ptr<Scratch>& holder) {
  if (x.dtype == dtype) return x;
  holder = scratch(dtype, shape_of(x));
  copy(holder->tensor, x);
  return holder->tensor;
}

void CnnlMath::cast(const H2_Tensor& y, const H2_Tensor& x) {
  cnnlCastDataType_t kind{};
  if (direct_cast(x.dtype, y.dtype, kind)) {
    TensorDesc in(x), out(y);
    H2_CNNL(cnnl_, cnnlCastDataType, handle_, in.get(), x.data, kind, out.get(), y.data);
    return;
  }
  if (x.dtype == H2_DTYPE_F32 || y.dtype == H2_DTYPE_F32)
    fail(H2_STATUS_UNSUPPORTED,
         "CNNL has no cast from dtype " + std::to_string(x.dtype) + " to dtype " + std::to_string(y.dtype));
  auto wide = scratch(H2_DTYPE_F32, shape_of(x));
  cast(wide->tensor, x);
  cast(y, wide->tensor);
}

void CnnlMath::copy(const H2_Tensor& y, const H2_Tensor& x) {
  if (h2::plugin::element_count(y) == 0) return;
  if (x.dtype != y.dtype) return cast(y, x);
  TensorDesc in(x), out(y);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetCopyWorkspaceSize, handle_, in.get(), out.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  H2_CNNL(cnnl_, cnnlCopy_v2, handle_, in.get(), x.data, out.get(), y.data, workspace.data(), bytes);
}

void CnnlMath::fill(const H2_Tensor& y, double value) {
  if (h2::plugin::element_count(y) == 0) return;
  TensorDesc out(y);
  // The host value has y's dtype; FLOAT for the 16-bit floats.
  const float as_float = static_cast<float>(value);
  const auto as_i32 = saturated<int32_t>(value);
  const auto as_i64 = saturated<int64_t>(value);
  const auto as_u8 = y.dtype == H2_DTYPE_BOOL ? static_cast<uint8_t>(value != 0) : saturated<uint8_t>(value);
  const void* host = nullptr;
  switch (y.dtype) {
    case H2_DTYPE_F32:
    case H2_DTYPE_F16:
    case H2_DTYPE_BF16: host = &as_float; break;
    case H2_DTYPE_I32: host = &as_i32; break;
    case H2_DTYPE_I64: host = &as_i64; break;
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL: host = &as_u8; break;
    default: fail(H2_STATUS_UNSUPPORTED, "cnnlFill_v3 of dtype " + std::to_string(y.dtype));
  }
  H2_CNNL(cnnl_, cnnlFill_v3, handle_, CNNL_POINTER_MODE_HOST, host, out.get(), y.data);
}

// The values depend on start, step and the length only, so they are computed on the host in FP64 as
// the ABI says and uploaded (cnnlArange_v2 computes in FP32).
void CnnlMath::arange(const H2_Tensor& y, double start, double step) {
  const int64_t n = y.shape[0];
  if (n == 0) return;
  auto at = [&](int64_t i) { return start + static_cast<double>(i) * step; };
  if (y.dtype == H2_DTYPE_I64 || y.dtype == H2_DTYPE_I32) {
    auto values = scratch(H2_DTYPE_I64, {n});
    std::vector<int64_t> host(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = saturated<int64_t>(at(i));
    upload(values->tensor, host.data(), host.size() * sizeof(int64_t));
    return copy(y, values->tensor);
  }
  auto values = scratch(H2_DTYPE_F32, {n});
  std::vector<float> host(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) host[static_cast<size_t>(i)] = static_cast<float>(at(i));
  upload(values->tensor, host.data(), host.size() * sizeof(float));
  copy(y, values->tensor);
}

void CnnlMath::upload(const H2_Tensor& to, const void* host, size_t bytes) {
  runtime().staging().to_device(stream_.queue, to.data, host, bytes);
}

void CnnlMath::transform(const H2_Tensor& y, const H2_Tensor& x, double alpha, double beta) {
  if (x.dtype != y.dtype) {
    std::unique_ptr<Scratch> wide;
    const H2_Tensor in = as_dtype(x, H2_DTYPE_F32, wide);
    auto out = scratch(H2_DTYPE_F32, shape_of(y));
    transform(out->tensor, in, alpha, beta);
    return copy(y, out->tensor);
  }
  TensorDesc in(x), out(y);
  const float a = static_cast<float>(alpha), b = static_cast<float>(beta);
  H2_CNNL(cnnl_, cnnlTransform_v2, handle_, CNNL_POINTER_MODE_HOST, &a, in.get(), x.data, &b, out.get(), y.data);
}

// x / s by a true division (not a multiplication by 1 / s), 16-bit data in FP32.
void CnnlMath::divide(const H2_Tensor& y, const H2_Tensor& x, double s) {
  auto divisor = scalar(H2_DTYPE_F32, s);
  binary(H2_BINARY_DIV, y, x, divisor->tensor);
}

void CnnlMath::op_tensor(cnnlOpTensorDesc_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b,
                         double alpha1, double alpha2) {
  if (a.dtype != y.dtype || b.dtype != y.dtype) {
    std::unique_ptr<Scratch> wide_a, wide_b;
    const H2_Tensor a32 = as_dtype(a, H2_DTYPE_F32, wide_a), b32 = as_dtype(b, H2_DTYPE_F32, wide_b);
    auto out = scratch(H2_DTYPE_F32, shape_of(y));
    op_tensor(op, out->tensor, a32, b32, alpha1, alpha2);
    return copy(y, out->tensor);
  }
  OpTensorDesc desc("cnnlCreateOpTensorDescriptor");
  H2_CNNL(cnnl_, cnnlSetOpTensorDescriptor, desc.get(), op, CNNL_DTYPE_FLOAT, CNNL_PROPAGATE_NAN);
  TensorDesc first(a), second(b), out(y);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetOpTensorWorkspaceSize, handle_, first.get(), second.get(), out.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  const float s1 = static_cast<float>(alpha1), s2 = static_cast<float>(alpha2), zero = 0.0f;
  H2_CNNL(cnnl_, cnnlOpTensor, handle_, desc.get(), &s1, first.get(), a.data, &s2, second.get(), b.data,
          workspace.data(), bytes, &zero, out.get(), y.data);
}

void CnnlMath::binary(uint32_t op, const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b) {
  switch (op) {
    case H2_BINARY_ADD: return op_tensor(CNNL_OP_TENSOR_ADD, y, a, b, 1.0, 1.0);
    case H2_BINARY_SUB: return op_tensor(CNNL_OP_TENSOR_SUB, y, a, b, 1.0, 1.0);
    case H2_BINARY_MUL: return op_tensor(CNNL_OP_TENSOR_MUL, y, a, b, 1.0, 1.0);
    default: break;
  }
  if (a.dtype != y.dtype || b.dtype != y.dtype) {
    std::unique_ptr<Scratch> wide_a, wide_b;
    const H2_Tensor a32 = as_dtype(a, H2_DTYPE_F32, wide_a), b32 = as_dtype(b, H2_DTYPE_F32, wide_b);
    auto out = scratch(H2_DTYPE_F32, shape_of(y));
    binary(op, out->tensor, a32, b32);
    return copy(y, out->tensor);
  }
  TensorDesc first(a), second(b), out(y);
  size_t bytes = 0;
  switch (op) {
    case H2_BINARY_DIV: {
      H2_CNNL(cnnl_, cnnlGetDivWorkspaceSize, handle_, first.get(), second.get(), out.get(), &bytes);
      StreamScratch workspace(stream_, bytes);
      H2_CNNL(cnnl_, cnnlDiv_v2, handle_, CNNL_COMPUTATION_HIGH_PRECISION, first.get(), a.data, second.get(), b.data,
              workspace.data(), bytes, out.get(), y.data);
      return;
    }
    case H2_BINARY_POW: {
      H2_CNNL(cnnl_, cnnlGetPowWorkspaceSize, handle_, first.get(), second.get(), out.get(), &bytes);
      StreamScratch workspace(stream_, bytes);
      H2_CNNL(cnnl_, cnnlPow, handle_, CNNL_COMPUTATION_HIGH_PRECISION, first.get(), a.data, second.get(), b.data,
              workspace.data(), bytes, out.get(), y.data);
      return;
    }
    case H2_BINARY_MAXIMUM:
    case H2_BINARY_MINIMUM: {
      const bool max = op == H2_BINARY_MAXIMUM;
      H2_CNNL(cnnl_, cnnlGetMaximumWorkspaceSize, handle_, out.get(), &bytes);
      StreamScratch workspace(stream_, bytes);
      const auto run = max ? cnnl_.cnnlMaximum : cnnl_.cnnlMinimum;
      cnnl_check(cnnl_,
                 run(handle_, first.get(), a.data, second.get(), b.data, out.get(), y.data, workspace.data(), bytes),
                 max ? "cnnlMaximum" : "cnnlMinimum");
      return;
    }
    default: fail(H2_STATUS_UNSUPPORTED, "binary operation " + std::to_string(op));
  }
}

void CnnlMath::unary(Unary op, const H2_Tensor& y, const H2_Tensor& x) {
  switch (op) {
    case Unary::exp: return elementwise(H2_UNARY_EXP, y, x);
    case Unary::log: return elementwise(H2_UNARY_LOG, y, x);
    case Unary::sqrt: return elementwise(H2_UNARY_SQRT, y, x);
    case Unary::reciprocal: return elementwise(H2_UNARY_RECIPROCAL, y, x);
    case Unary::abs: return elementwise(kUnaryAbs, y, x);
  }
}

void CnnlMath::elementwise(uint32_t op, const H2_Tensor& y, const H2_Tensor& x) {
  if (x.dtype != y.dtype) {
    std::unique_ptr<Scratch> wide;
    const H2_Tensor in = as_dtype(x, H2_DTYPE_F32, wide);
    auto out = scratch(H2_DTYPE_F32, shape_of(y));
    elementwise(op, out->tensor, in);
    return copy(y, out->tensor);
  }
  TensorDesc in(x), out(y);
  const auto prefer = CNNL_COMPUTATION_HIGH_PRECISION;
  switch (op) {
    case H2_UNARY_EXP: return H2_CNNL(cnnl_, cnnlExp_v2, handle_, prefer, in.get(), x.data, out.get(), y.data);
    case H2_UNARY_LOG:
      return H2_CNNL(cnnl_, cnnlLog_v2, handle_, prefer, CNNL_LOG_E, in.get(), x.data, out.get(), y.data);
    case H2_UNARY_SQRT: return H2_CNNL(cnnl_, cnnlSqrt_v2, handle_, prefer, in.get(), x.data, out.get(), y.data);
    case H2_UNARY_RSQRT: return H2_CNNL(cnnl_, cnnlRsqrt_v2, handle_, prefer, in.get(), x.data, out.get(), y.data);
    case H2_UNARY_NEG: return H2_CNNL(cnnl_, cnnlNegTensor, handle_, in.get(), x.data, out.get(), y.data);
    case H2_UNARY_RECIPROCAL: return H2_CNNL(cnnl_, cnnlReciprocal, handle_, in.get(), x.data, out.get(), y.data);
    case kUnaryAbs: return H2_CNNL(cnnl_, cnnlAbs, handle_, in.get(), x.data, out.get(), y.data);
    default: fail(H2_STATUS_UNSUPPORTED, "unary operation " + std::to_string(op));
  }
}

void CnnlMath::power(const H2_Tensor& y, const H2_Tensor& x, double p) {
  auto exponent = scalar(H2_DTYPE_F32, p);
  binary(H2_BINARY_POW, y, x, exponent->tensor);
}

void CnnlMath::clamp_max(const H2_Tensor& y, const H2_Tensor& x, double limit) {
  auto bound = scalar(H2_DTYPE_F32, limit);
  binary(H2_BINARY_MINIMUM, y, x, bound->tensor);
}

void CnnlMath::logic(cnnlLogicOp_t op, const H2_Tensor& mask, const H2_Tensor& a, const H2_Tensor& b) {
  TensorDesc first(a), second(b), out(mask);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetLogicOpWorkspaceSize, handle_, first.get(), second.get(), out.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  H2_CNNL(cnnl_, cnnlLogicOp, handle_, op, first.get(), a.data, second.get(), b.data, workspace.data(), bytes,
          out.get(), mask.data);
}

void CnnlMath::compare(cnnlLogicOp_t op, const H2_Tensor& mask, const H2_Tensor& x, double value) {
  auto other = scalar(x.dtype, value);
  logic(op, mask, x, other->tensor);
}

void CnnlMath::not_finite(const H2_Tensor& mask, const H2_Tensor& x) {
  auto nan = scratch(H2_DTYPE_BOOL, shape_of(mask)), infinite = scratch(H2_DTYPE_BOOL, shape_of(mask));
  auto magnitude = scratch(x.dtype, shape_of(x));
  logic(CNNL_LOGIC_OP_NE, nan->tensor, x, x);  // only NaN differs from itself
  elementwise(kUnaryAbs, magnitude->tensor, x);
  compare(CNNL_LOGIC_OP_EQ, infinite->tensor, magnitude->tensor, std::numeric_limits<double>::infinity());
  logic(CNNL_LOGIC_OP_OR, mask, nan->tensor, infinite->tensor);
}

std::unique_ptr<h2::plugin::DeviceMath::Scratch> CnnlMath::bool_mask(const H2_Tensor& mask) {
  if (mask.dtype == H2_DTYPE_BOOL) return nullptr;
  auto converted = scratch(H2_DTYPE_BOOL, shape_of(mask));
  compare(CNNL_LOGIC_OP_NE, converted->tensor, mask, 0.0);
  return converted;
}

void CnnlMath::where(const H2_Tensor& y, const H2_Tensor& cond, const H2_Tensor& a, const H2_Tensor& b) {
  if (a.dtype != y.dtype || b.dtype != y.dtype) {
    std::unique_ptr<Scratch> wide_a, wide_b;
    const H2_Tensor a_y = as_dtype(a, y.dtype, wide_a), b_y = as_dtype(b, y.dtype, wide_b);
    return where(y, cond, a_y, b_y);
  }
  const auto converted = bool_mask(cond);
  const H2_Tensor& c = converted ? converted->tensor : cond;
  TensorDesc condition(c), then_desc(a), else_desc(b), out(y);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetSelectV2WorkspaceSize, handle_, condition.get(), then_desc.get(), else_desc.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  H2_CNNL(cnnl_, cnnlSelectV2, handle_, condition.get(), c.data, then_desc.get(), a.data, else_desc.get(), b.data,
          workspace.data(), bytes, out.get(), y.data);
}

void CnnlMath::masked_fill(const H2_Tensor& y, const H2_Tensor& mask, double value) {
  auto filled = scalar(y.dtype, value);
  where(y, mask, filled->tensor, y);
}

void CnnlMath::reduce(Reduce op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep) {
  switch (op) {
    case Reduce::sum: return cnnl_reduce(CNNL_REDUCE_ADD, y, x, dims, keep);
    case Reduce::mean: return cnnl_reduce(CNNL_REDUCE_AVG, y, x, dims, keep);
    case Reduce::max: return cnnl_reduce(CNNL_REDUCE_MAX, y, x, dims, keep);
  }
}

void CnnlMath::cnnl_reduce(cnnlReduceOp_t op, const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims,
                           bool keep, const H2_Tensor* indices) {
  if (dims.empty()) return copy(y, x);
  std::unique_ptr<Scratch> converted;
  const H2_Tensor in = as_dtype(x, y.dtype, converted);
  // cnnlReduce keeps the input's rank: y seen with its reduced dimensions (size 1) put back.
  H2_Tensor out = y;
  if (!keep) {
    out.rank = x.rank;
    uint32_t from = 0;
    for (uint32_t d = 0; d < x.rank; ++d) {
      const bool reduced = std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
      out.shape[d] = reduced ? 1 : y.shape[from];
      out.strides[d] = reduced ? 0 : y.strides[from];
      if (!reduced) ++from;
    }
  }
  std::vector<int> axes(dims.begin(), dims.end());
  ReduceDesc desc("cnnlCreateReduceDescriptor");
  H2_CNNL(cnnl_, cnnlSetReduceDescriptor_v2, desc.get(), axes.data(), static_cast<int>(axes.size()), op,
          CNNL_DTYPE_FLOAT, CNNL_PROPAGATE_NAN, indices ? CNNL_REDUCE_FLATTENED_INDICES : CNNL_REDUCE_NO_INDICES,
          CNNL_64BIT_INDICES, 2.0f);
  TensorDesc input(in), output(out);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetReduceOpWorkspaceSize, handle_, input.get(), output.get(), desc.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  // The positions land contiguous in scratch, then in `indices` as it is laid out.
  std::unique_ptr<Scratch> positions;
  size_t position_bytes = 0;
  if (indices) {
    positions = scratch(H2_DTYPE_I64, shape_of(*indices));
    position_bytes = static_cast<size_t>(h2::plugin::element_count(*indices)) * sizeof(int64_t);
  }
  H2_CNNL(cnnl_, cnnlReduce, handle_, desc.get(), workspace.data(), bytes, nullptr, input.get(), in.data,
          position_bytes, positions ? positions->tensor.data : nullptr, nullptr, output.get(), out.data);
  if (indices) copy(*indices, positions->tensor);
}

void CnnlMath::gather(const H2_Tensor& y, const H2_Tensor& x, int64_t dim, const H2_Tensor& index) {
  TensorDesc input(x), where(index), out(y);
  H2_CNNL(cnnl_, cnnlGather_v2, handle_, static_cast<int>(dim), input.get(), x.data, where.get(), index.data, nullptr,
          0, out.get(), y.data);
}

void CnnlMath::scatter_add(const H2_Tensor& y, int64_t dim, const H2_Tensor& index, const H2_Tensor& src) {
  std::unique_ptr<Scratch> converted;
  const H2_Tensor from = as_dtype(src, y.dtype, converted);
  TensorDesc target(y), where(index), source(from);
  size_t bytes = 0;
  H2_CNNL(cnnl_, cnnlGetScatterWorkspaceSize, handle_, where.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  H2_CNNL(cnnl_, cnnlScatter_v2, handle_, static_cast<int>(dim), target.get(), y.data, where.get(), index.data,
          source.get(), from.data, workspace.data(), bytes, target.get(), y.data, CNNL_SCATTER_ADD);
}

void CnnlMath::bmm(const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b, double alpha) {
  matmul(c, a, false, b, false, alpha, 0.0);
}

void CnnlMath::matmul(const H2_Tensor& c, const H2_Tensor& a_in, bool transpose_a, const H2_Tensor& b_in,
                      bool transpose_b, double alpha, double beta) {
  if (a_in.dtype != c.dtype || b_in.dtype != c.dtype) {
    std::unique_ptr<Scratch> wide_a, wide_b, wide_c;
    const H2_Tensor a32 = as_dtype(a_in, H2_DTYPE_F32, wide_a), b32 = as_dtype(b_in, H2_DTYPE_F32, wide_b);
    const H2_Tensor c32 = as_dtype(c, H2_DTYPE_F32, wide_c);
    matmul(c32, a32, transpose_a, b32, transpose_b, alpha, beta);
    if (c32.data != c.data) copy(c, c32);
    return;
  }
  // CNNL's matmuls read row-major matrices: a view that is a transpose becomes the flag, any other
  // layout a contiguous copy.
  H2_Tensor a = a_in, b = b_in;
  std::unique_ptr<Scratch> packed_a, packed_b;
  for (auto [t, flag, packed] : {std::tuple{&a, &transpose_a, &packed_a}, std::tuple{&b, &transpose_b, &packed_b}}) {
    if (row_major_operand(*t, *flag)) continue;
    *packed = scratch(t->dtype, shape_of(*t));
    copy((*packed)->tensor, *t);
    *t = (*packed)->tensor;
  }
  MatMulDesc desc("cnnlMatMulDescCreate");
  set_attribute(cnnl_, desc.get(), CNNL_MATMUL_DESC_TRANSA, transpose_a ? 1 : 0);
  set_attribute(cnnl_, desc.get(), CNNL_MATMUL_DESC_TRANSB, transpose_b ? 1 : 0);
  set_attribute(cnnl_, desc.get(), CNNL_MATMUL_ALLOW_TF32, 0);  // FP32 stays FP32
  set_attribute(cnnl_, desc.get(), CNNL_MATMUL_DESC_COMPUTE_TYPE, CNNL_DTYPE_FLOAT);
  set_attribute(cnnl_, desc.get(), CNNL_MATMUL_USE_BETA, beta != 0 ? 1 : 0);
  TensorDesc first(a), second(b), out(c);
  if (c.dtype != H2_DTYPE_F32) out.set_onchip(CNNL_DTYPE_FLOAT);
  MatMulAlgo algo("cnnlMatMulAlgoCreate");
  MatMulHeuristic heuristic("cnnlCreateMatMulHeuristicResult");
  cnnlMatMulHeuristicResult_t results[1] = {heuristic.get()};
  int returned = 0;
  size_t bytes = 0;
  const float s = static_cast<float>(alpha), t = static_cast<float>(beta);
  const bool batched = a.rank > 2 || b.rank > 2 || c.rank > 2;
  if (!batched) {
    H2_CNNL(cnnl_, cnnlGetMatMulAlgoHeuristic, handle_, desc.get(), first.get(), second.get(), out.get(), out.get(),
            nullptr, 1, results, &returned);
    H2_CNNL(cnnl_, cnnlGetMatMulHeuristicResult, heuristic.get(), algo.get(), &bytes);
    StreamScratch workspace(stream_, bytes);
    H2_CNNL(cnnl_, cnnlMatMul_v2, handle_, desc.get(), algo.get(), &s, first.get(), a.data, second.get(), b.data, &t,
            out.get(), c.data, workspace.data(), bytes, out.get(), c.data);
    return;
  }
  H2_CNNL(cnnl_, cnnlGetBatchMatMulAlgoHeuristic, handle_, desc.get(), first.get(), second.get(), out.get(), nullptr, 1,
          results, &returned);
  H2_CNNL(cnnl_, cnnlGetBatchMatMulHeuristicResult, heuristic.get(), algo.get(), &bytes);
  StreamScratch workspace(stream_, bytes);
  H2_CNNL(cnnl_, cnnlBatchMatMulBCast_v2, handle_, desc.get(), algo.get(), &s, first.get(), a.data, second.get(),
          b.data, &t, out.get(), c.data, workspace.data(), bytes);
}

void CnnlMath::activation(cnnlActivationMode_t mode, bool approximate, const H2_Tensor& y, const H2_Tensor& x) {
  ActivationDesc desc("cnnlCreateActivationDescriptor");
  H2_CNNL(cnnl_, cnnlSetActivationDescriptor_v6, desc.get(), mode, CNNL_ACTIVATION_HIGH_PRECISION, CNNL_PROPAGATE_NAN,
          0.0f, 0, 0.0f, 0.0f, false, approximate);
  TensorDesc in(x), out(y);
  H2_CNNL(cnnl_, cnnlActivationForward, handle_, desc.get(), nullptr, in.get(), x.data, nullptr, out.get(), y.data);
}

void CnnlMath::activation_backward(cnnlActivationMode_t mode, bool approximate, const H2_Tensor& dx, const H2_Tensor& x,
                                   const H2_Tensor& dy) {
  ActivationDesc desc("cnnlCreateActivationDescriptor");
  H2_CNNL(cnnl_, cnnlSetActivationDescriptor_v6, desc.get(), mode, CNNL_ACTIVATION_HIGH_PRECISION, CNNL_PROPAGATE_NAN,
          0.0f, 0, 0.0f, 0.0f, false, approximate);
  TensorDesc in(x), grad(dy), out(dx);
  // GELU and SILU differentiate from the forward's input; the output's slot stays NULL.
  H2_CNNL(cnnl_, cnnlActivationBackward, handle_, desc.get(), nullptr, nullptr, nullptr, grad.get(), dy.data, in.get(),
          x.data, nullptr, out.get(), dx.data);
}

}  // namespace h2::mlu
