#include "tensor_ref.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "../runtime.hpp"
#include "common.hpp"
#include "dtype_size.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

int64_t TensorRef::offset_of(int64_t linear) const {
  int64_t offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    offset += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return offset;
}

size_t dtype_bytes(H2_DType dtype) {
  return h2::plugin::dtype_size(dtype);
}

TensorRef resolve_tensor(const Runtime& runtime, int device, const H2_Tensor& tensor, const char* role) {
  TensorRef ref;
  if (tensor.data == nullptr) return ref;
  ref.present = true;
  ref.dtype = static_cast<H2_DType>(tensor.dtype);
  ref.rank = static_cast<int>(tensor.rank);
  if (dtype_bytes(ref.dtype) == 0 || ref.rank > H2_MAX_RANK)
    fail(H2_STATUS_INVALID_ARGUMENT, std::string(role) + ": invalid dtype or rank");
  int64_t last = 0;
  bool empty = false;
  for (int d = 0; d < ref.rank; ++d) {
    ref.shape[d] = tensor.shape[d];
    ref.strides[d] = tensor.strides[d];
    if (ref.shape[d] == 0) empty = true;
    last += (ref.shape[d] - 1) * ref.strides[d];
  }
  if (empty) return ref;  // nothing to read or write; base stays nullptr
  const size_t bytes = static_cast<size_t>(last + 1) * dtype_bytes(ref.dtype);
  ref.base = static_cast<char*>(runtime.memory(device).resolve(tensor.data, bytes, role));
  return ref;
}

double load_element(const TensorRef& t, int64_t offset) {
  const char* p = t.base + offset * static_cast<int64_t>(dtype_bytes(t.dtype));
  switch (t.dtype) {
    case H2_DTYPE_F64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case H2_DTYPE_F32: {
      float v;
      std::memcpy(&v, p, 4);
      if (planted_defect() == Defect::flushes_subnormals && std::fpclassify(v) == FP_SUBNORMAL) return 0.0;
      return v;
    }
    case H2_DTYPE_F16:
    case H2_DTYPE_BF16: {
      uint16_t bits;
      std::memcpy(&bits, p, 2);
      if (planted_defect() == Defect::flushes_subnormals && (bits & (t.dtype == H2_DTYPE_F16 ? 0x7C00 : 0x7F80)) == 0)
        return 0.0;
      return t.dtype == H2_DTYPE_F16 ? f16_to_f64(bits) : bf16_to_f64(bits);
    }
    case H2_DTYPE_I32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case H2_DTYPE_I64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case H2_DTYPE_U8:
    case H2_DTYPE_BOOL: return static_cast<unsigned char>(*p);
    default: fail(H2_STATUS_INTERNAL, "load of an invalid dtype");
  }
}

namespace {

// Float to integer: truncate toward zero, saturate, NaN to 0 (the contract of the copy operator).
template <typename Int>
Int to_integer(double value) {
  if (std::isnan(value)) return 0;
  const double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (truncated >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(truncated);
}

}  // namespace

void store_element(const TensorRef& t, int64_t offset, double value) {
  char* p = t.base + offset * static_cast<int64_t>(dtype_bytes(t.dtype));
  switch (t.dtype) {
    case H2_DTYPE_F64: std::memcpy(p, &value, 8); return;
    case H2_DTYPE_F32: {
      const float v = static_cast<float>(value);  // one rounding, to nearest even
      std::memcpy(p, &v, 4);
      return;
    }
    case H2_DTYPE_F16:
    case H2_DTYPE_BF16: {
      uint16_t bits = t.dtype == H2_DTYPE_F16 ? f64_to_f16(value) : f64_to_bf16(value);
      if (planted_defect() == Defect::saturating_f16 && t.dtype == H2_DTYPE_F16 && (bits & 0x7FFF) == 0x7C00 &&
          std::isfinite(value))
        bits = static_cast<uint16_t>((bits & 0x8000) | 0x7BFF);  // +-65504
      // Exponent bits all zero and a nonzero fraction: a subnormal, flushed to a signed zero.
      if (planted_defect() == Defect::flushes_subnormals && (bits & 0x7FFF) != 0 &&
          (bits & (t.dtype == H2_DTYPE_F16 ? 0x7C00 : 0x7F80)) == 0)
        bits &= 0x8000;
      if (planted_defect() == Defect::bf16_truncation && t.dtype == H2_DTYPE_BF16) {
        const float f = static_cast<float>(value);
        uint32_t raw;
        std::memcpy(&raw, &f, 4);
        bits = static_cast<uint16_t>(raw >> 16);
      }
      std::memcpy(p, &bits, 2);
      return;
    }
    case H2_DTYPE_I32: {
      const int32_t v = to_integer<int32_t>(value);
      std::memcpy(p, &v, 4);
      return;
    }
    case H2_DTYPE_I64: {
      const int64_t v = to_integer<int64_t>(value);
      std::memcpy(p, &v, 8);
      return;
    }
    case H2_DTYPE_U8: *reinterpret_cast<unsigned char*>(p) = to_integer<unsigned char>(value); return;
    case H2_DTYPE_BOOL: *reinterpret_cast<unsigned char*>(p) = value != 0 ? 1 : 0; return;
    default: fail(H2_STATUS_INTERNAL, "store of an invalid dtype");
  }
}

double round_to(H2_DType dtype, double value) {
  switch (dtype) {
    case H2_DTYPE_F32: return static_cast<float>(value);
    case H2_DTYPE_F16: return f16_to_f64(f64_to_f16(value));
    case H2_DTYPE_BF16: return bf16_to_f64(f64_to_bf16(value));
    default: return value;
  }
}

namespace {

// Calls fn(offset) for every element in row-major logical order, with an odometer over the index
// (no division per element).
template <typename Fn>
void for_each_offset(const TensorRef& t, Fn&& fn) {
  const int64_t n = t.numel();
  if (n == 0) return;
  int64_t index[H2_MAX_RANK] = {};
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    fn(i, offset);
    for (int d = t.rank - 1; d >= 0; --d) {
      if (++index[d] < t.shape[d]) {
        offset += t.strides[d];
        break;
      }
      offset -= (t.shape[d] - 1) * t.strides[d];
      index[d] = 0;
    }
  }
}

}  // namespace

Values load(const TensorRef& t) {
  Values values(static_cast<size_t>(t.numel()));
  if (t.dtype == H2_DTYPE_F32) {  // the common case, without the per-element dtype switch
    for_each_offset(t, [&](int64_t i, int64_t offset) {
      float v;
      std::memcpy(&v, t.base + offset * 4, 4);
      values[static_cast<size_t>(i)] = v;
    });
  } else {
    for_each_offset(t, [&](int64_t i, int64_t offset) { values[static_cast<size_t>(i)] = load_element(t, offset); });
  }
  return values;
}

void store(const TensorRef& t, const Values& values) {
  if (t.dtype == H2_DTYPE_F32) {
    for_each_offset(t, [&](int64_t i, int64_t offset) {
      const float v = static_cast<float>(values[static_cast<size_t>(i)]);
      std::memcpy(t.base + offset * 4, &v, 4);
    });
  } else {
    for_each_offset(t, [&](int64_t i, int64_t offset) { store_element(t, offset, values[static_cast<size_t>(i)]); });
  }
}

std::vector<int64_t> load_indices(const TensorRef& t) {
  std::vector<int64_t> values(static_cast<size_t>(t.numel()));
  for_each_offset(t, [&](int64_t i, int64_t offset) {
    const char* p = t.base + offset * static_cast<int64_t>(dtype_bytes(t.dtype));
    int64_t v = 0;
    switch (t.dtype) {
      case H2_DTYPE_I64: std::memcpy(&v, p, 8); break;
      case H2_DTYPE_I32: {
        int32_t w;
        std::memcpy(&w, p, 4);
        v = w;
        break;
      }
      case H2_DTYPE_U8:
      case H2_DTYPE_BOOL: v = static_cast<unsigned char>(*p); break;
      default: fail(H2_STATUS_INTERNAL, "index tensor of a non-integer dtype");
    }
    values[static_cast<size_t>(i)] = v;
  });
  return values;
}

}  // namespace h2::cpu_reference
