#include "tensor_io.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace mlu_emulator {
namespace {

// BFLOAT16 is the upper half of an FP32; rounding keeps the nearest, ties to even, and NaN a NaN.
double bf16_value(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}
uint16_t bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

template <typename Int>
Int saturated(double x) {
  if (std::isnan(x)) return 0;
  const double t = std::trunc(x);
  if (t <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (t >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(t);
}

double load(cnnlDataType_t dtype, const char* at) {
  switch (dtype) {
    case CNNL_DTYPE_FLOAT: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case CNNL_DTYPE_HALF: {
      _Float16 v;
      std::memcpy(&v, at, 2);
      return static_cast<double>(v);
    }
    case CNNL_DTYPE_BFLOAT16: {
      uint16_t v;
      std::memcpy(&v, at, 2);
      return bf16_value(v);
    }
    case CNNL_DTYPE_DOUBLE: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case CNNL_DTYPE_INT32: {
      int32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case CNNL_DTYPE_INT64: {
      int64_t v;
      std::memcpy(&v, at, 8);
      return static_cast<double>(v);
    }
    case CNNL_DTYPE_INT16: {
      int16_t v;
      std::memcpy(&v, at, 2);
      return v;
    }
    case CNNL_DTYPE_INT8: return static_cast<int8_t>(*at);
    case CNNL_DTYPE_UINT8:
    case CNNL_DTYPE_BOOL: return static_cast<uint8_t>(*at);
    default: throw Error(CNNL_STATUS_NOT_SUPPORTED, "dtype " + dtype_text(dtype) + " is not emulated");
  }
}

void store(cnnlDataType_t dtype, char* at, double x) {
  switch (dtype) {
    case CNNL_DTYPE_FLOAT: {
      const float v = static_cast<float>(x);
      std::memcpy(at, &v, 4);
      return;
    }
    case CNNL_DTYPE_HALF: {
      const _Float16 v = static_cast<_Float16>(static_cast<float>(x));
      std::memcpy(at, &v, 2);
      return;
    }
    case CNNL_DTYPE_BFLOAT16: {
      const uint16_t v = bf16_bits(static_cast<float>(x));
      std::memcpy(at, &v, 2);
      return;
    }
    case CNNL_DTYPE_DOUBLE: std::memcpy(at, &x, 8); return;
    case CNNL_DTYPE_INT32: {
      const int32_t v = saturated<int32_t>(x);
      std::memcpy(at, &v, 4);
      return;
    }
    case CNNL_DTYPE_INT64: {
      const int64_t v = saturated<int64_t>(x);
      std::memcpy(at, &v, 8);
      return;
    }
    case CNNL_DTYPE_INT16: {
      const int16_t v = saturated<int16_t>(x);
      std::memcpy(at, &v, 2);
      return;
    }
    case CNNL_DTYPE_INT8: *at = static_cast<char>(saturated<int8_t>(x)); return;
    case CNNL_DTYPE_UINT8: *at = static_cast<char>(saturated<uint8_t>(x)); return;
    case CNNL_DTYPE_BOOL: *at = static_cast<char>(x != 0 ? 1 : 0); return;
    default: throw Error(CNNL_STATUS_NOT_SUPPORTED, "dtype " + dtype_text(dtype) + " is not emulated");
  }
}

// Visits the storage offsets (in elements) of every logical element of `dims` viewed with `strides`,
// in row-major order.
template <typename Visit>
void for_each_offset(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, Visit visit) {
  const size_t rank = dims.size();
  for (int64_t d : dims)
    if (d == 0) return;
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (;;) {
    visit(offset);
    size_t d = rank;
    while (d > 0) {
      --d;
      if (++index[d] < dims[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (dims[d] - 1);
      index[d] = 0;
      if (d == 0) return;
    }
    if (rank == 0) return;
  }
}

// The host view of a tensor's whole extent.
char* extent_view(const Operand& t) {
  int64_t last = 0;
  for (size_t d = 0; d < t.dims.size(); ++d)
    if (t.dims[d] > 0) last += (t.dims[d] - 1) * t.strides[d];
  return static_cast<char*>(device_view(t.data, static_cast<size_t>(last + 1) * dtype_bytes(t.dtype)));
}

}  // namespace

size_t dtype_bytes(cnnlDataType_t dtype) {
  switch (dtype) {
    case CNNL_DTYPE_INT8:
    case CNNL_DTYPE_UINT8:
    case CNNL_DTYPE_BOOL: return 1;
    case CNNL_DTYPE_HALF:
    case CNNL_DTYPE_BFLOAT16:
    case CNNL_DTYPE_INT16: return 2;
    case CNNL_DTYPE_FLOAT:
    case CNNL_DTYPE_INT32: return 4;
    case CNNL_DTYPE_INT64:
    case CNNL_DTYPE_DOUBLE: return 8;
    default: return 0;
  }
}

bool is_floating(cnnlDataType_t dtype) {
  return dtype == CNNL_DTYPE_FLOAT || dtype == CNNL_DTYPE_HALF || dtype == CNNL_DTYPE_BFLOAT16 ||
         dtype == CNNL_DTYPE_DOUBLE;
}

std::string dtype_text(cnnlDataType_t dtype) {
  switch (dtype) {
    case CNNL_DTYPE_HALF: return "HALF";
    case CNNL_DTYPE_FLOAT: return "FLOAT";
    case CNNL_DTYPE_BFLOAT16: return "BFLOAT16";
    case CNNL_DTYPE_DOUBLE: return "DOUBLE";
    case CNNL_DTYPE_INT8: return "INT8";
    case CNNL_DTYPE_INT16: return "INT16";
    case CNNL_DTYPE_INT32: return "INT32";
    case CNNL_DTYPE_INT64: return "INT64";
    case CNNL_DTYPE_UINT8: return "UINT8";
    case CNNL_DTYPE_BOOL: return "BOOL";
    default: return "dtype " + std::to_string(static_cast<int>(dtype));
  }
}

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

double rounded_to(cnnlDataType_t dtype, double x) {
  char bytes[8];
  store(dtype, bytes, x);
  return load(dtype, bytes);
}

bool broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  const size_t skip = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d)
    if (from[d] != to[skip + d] && from[d] != 1) return false;
  return true;
}

std::vector<double> read(const Operand& t) {
  return read_broadcast(t, t.dims);
}

std::vector<double> read_broadcast(const Operand& t, const std::vector<int64_t>& shape) {
  if (!broadcasts(t.dims, shape))
    throw Error(CNNL_STATUS_BAD_PARAM, shape_text(t.dims) + " does not broadcast to " + shape_text(shape));
  // Broadcast dimensions read with stride 0.
  std::vector<int64_t> strides(shape.size(), 0);
  const size_t skip = shape.size() - t.dims.size();
  for (size_t d = 0; d < t.dims.size(); ++d) strides[skip + d] = t.dims[d] == shape[skip + d] ? t.strides[d] : 0;
  std::vector<double> values;
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  values.reserve(static_cast<size_t>(count));
  if (count == 0) return values;
  const char* base = extent_view(t);
  const size_t size = dtype_bytes(t.dtype);
  for_each_offset(shape, strides,
                  [&](int64_t offset) { values.push_back(load(t.dtype, base + static_cast<size_t>(offset) * size)); });
  return values;
}

void write(const Operand& t, const std::vector<double>& values) {
  if (static_cast<int64_t>(values.size()) != t.count())
    throw Error(CNNL_STATUS_INTERNAL_ERROR, "a kernel produced " + std::to_string(values.size()) + " values for " +
                                                std::to_string(t.count()) + " elements");
  if (values.empty()) return;
  char* base = extent_view(t);
  const size_t size = dtype_bytes(t.dtype);
  size_t i = 0;
  for_each_offset(t.dims, t.strides,
                  [&](int64_t offset) { store(t.dtype, base + static_cast<size_t>(offset) * size, values[i++]); });
}

}  // namespace mlu_emulator
