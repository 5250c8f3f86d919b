#include "tensor_access.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace ascend_emulator {

float half_to_float(uint16_t bits) {
  const uint32_t sign = (bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero, subnormal
  else if (exponent == 31)
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : INFINITY;
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

uint16_t float_to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(value);
  if (std::isnan(value)) return static_cast<uint16_t>(sign | 0x7e00);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {
    // Subnormal: a multiple of 2^-24, rounded to nearest even by the FPU's own rounding.
    const float scaled = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(scaled));
  }
  int exponent;
  const float fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent, fraction in [0.5, 1)
  float mantissa = std::nearbyint(fraction * 2048.0f);      // 11 significant bits
  if (mantissa == 2048.0f) {
    mantissa = 1024.0f;
    ++exponent;
  }
  const uint32_t biased = static_cast<uint32_t>(exponent + 14);
  if (biased >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | (biased << 10) | (static_cast<uint32_t>(mantissa) - 1024));
}

float bf16_to_float(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float result;
  std::memcpy(&result, &widened, 4);
  return result;
}

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);  // to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

size_t element_size(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT:
    case ACL_INT32: return 4;
    case ACL_FLOAT16:
    case ACL_BF16: return 2;
    case ACL_INT64:
    case ACL_DOUBLE: return 8;
    case ACL_INT8:
    case ACL_UINT8:
    case ACL_BOOL: return 1;
    default:
      throw Error(ACLNN_ERR_PARAM_INVALID, "data type " + std::to_string(static_cast<int>(dtype)) + " is not emulated");
  }
}

bool is_float(aclDataType dtype) {
  return dtype == ACL_FLOAT || dtype == ACL_FLOAT16 || dtype == ACL_BF16 || dtype == ACL_DOUBLE;
}

std::string dtype_name(aclDataType dtype) {
  switch (dtype) {
    case ACL_FLOAT: return "FLOAT";
    case ACL_FLOAT16: return "FLOAT16";
    case ACL_BF16: return "BFLOAT16";
    case ACL_DOUBLE: return "DOUBLE";
    case ACL_INT32: return "INT32";
    case ACL_INT64: return "INT64";
    case ACL_INT8: return "INT8";
    case ACL_UINT8: return "UINT8";
    case ACL_BOOL: return "BOOL";
    default: return "type " + std::to_string(static_cast<int>(dtype));
  }
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t size : shape) count *= size;
  return count;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

void check_tensor(const aclTensor* tensor, const char* role) {
  if (tensor == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, std::string(role) + " is NULL");
  const std::string name = std::string(role) + " " + shape_text(tensor->view);
  const int64_t storage = element_count(tensor->storage);
  int64_t last = tensor->offset;
  for (size_t d = 0; d < tensor->view.size(); ++d) {
    if (tensor->view[d] == 0) return;  // empty: reads nothing
    last += (tensor->view[d] - 1) * tensor->strides[d];
  }
  if (last >= storage)
    throw Error(ACLNN_ERR_PARAM_INVALID, name + " reaches element " + std::to_string(last) + " of a storage of " +
                                             std::to_string(storage) + " elements");
  const size_t bytes = static_cast<size_t>(storage) * element_size(tensor->dtype);
  if (!is_device_memory(tensor->data, bytes))
    throw Error(ACLNN_ERR_PARAM_INVALID,
                name + ": its storage of " + std::to_string(bytes) + " bytes is not inside one live device allocation");
}

bool broadcasts(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t a = from[from.size() - 1 - i];
    const int64_t b = to[to.size() - 1 - i];
    if (a != b && a != 1) return false;
  }
  return true;
}

Elements::Elements(const aclTensor& tensor, const std::vector<int64_t>& shape)
    : dtype_(tensor.dtype),
      shape_(shape),
      strides_(shape.size(), 0),
      offset_(tensor.offset),
      count_(element_count(shape)) {
  if (!broadcasts(tensor.view, shape))
    throw Error(ACLNN_ERR_PARAM_INVALID,
                "shape " + shape_text(tensor.view) + " does not broadcast to " + shape_text(shape));
  const size_t skip = shape.size() - tensor.view.size();
  for (size_t d = 0; d < tensor.view.size(); ++d) strides_[skip + d] = tensor.view[d] == 1 ? 0 : tensor.strides[d];
  const size_t bytes = static_cast<size_t>(element_count(tensor.storage)) * element_size(dtype_);
  base_ = count_ > 0 ? static_cast<char*>(device_view(tensor.data, bytes)) : nullptr;
}

int64_t Elements::offset_of(int64_t index) const {
  int64_t offset = offset_;
  for (size_t d = shape_.size(); d-- > 0;) {
    const int64_t size = shape_[d];
    offset += (index % size) * strides_[d];
    index /= size;
  }
  return offset;
}

void Elements::load_range(int64_t first, int64_t count, float* out) const {
  if (count <= 0) return;
  const size_t rank = shape_.size();
  std::vector<int64_t> coordinate(rank, 0);
  int64_t rest = first;
  for (size_t d = rank; d-- > 0;) {
    coordinate[d] = rest % shape_[d];
    rest /= shape_[d];
  }
  int64_t offset = offset_of(first);
  const auto element = static_cast<int64_t>(element_size(dtype_));
  for (int64_t i = 0; i < count; ++i) {
    const char* at = base_ + offset * element;
    switch (dtype_) {
      case ACL_FLOAT: std::memcpy(&out[i], at, 4); break;
      case ACL_FLOAT16: {
        uint16_t v;
        std::memcpy(&v, at, 2);
        out[i] = half_to_float(v);
        break;
      }
      case ACL_BF16: {
        uint16_t v;
        std::memcpy(&v, at, 2);
        out[i] = bf16_to_float(v);
        break;
      }
      default: out[i] = static_cast<float>(load(first + i)); break;
    }
    // Advance the multi-index (the last dimension fastest) and the offset with it.
    for (size_t d = rank; d-- > 0;) {
      offset += strides_[d];
      if (++coordinate[d] < shape_[d]) break;
      offset -= strides_[d] * shape_[d];
      coordinate[d] = 0;
    }
  }
}

double Elements::load(int64_t index) const {
  const char* at = base_ + offset_of(index) * static_cast<int64_t>(element_size(dtype_));
  switch (dtype_) {
    case ACL_FLOAT: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case ACL_DOUBLE: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case ACL_FLOAT16: {
      uint16_t v;
      std::memcpy(&v, at, 2);
      return half_to_float(v);
    }
    case ACL_BF16: {
      uint16_t v;
      std::memcpy(&v, at, 2);
      return bf16_to_float(v);
    }
    case ACL_INT32: {
      int32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case ACL_INT64: {
      int64_t v;
      std::memcpy(&v, at, 8);
      return static_cast<double>(v);
    }
    case ACL_INT8: return static_cast<int8_t>(*at);
    case ACL_UINT8: return static_cast<uint8_t>(*at);
    case ACL_BOOL: return *at != 0 ? 1 : 0;
    default: throw Error(ACLNN_ERR_INNER, "unreachable data type");
  }
}

namespace {

// The AI core's float-to-integer conversion: toward zero, saturating, NaN to 0.
template <typename Int>
Int to_integer(double value) {
  if (std::isnan(value)) return 0;
  const double truncated = std::trunc(value);
  if (truncated <= static_cast<double>(std::numeric_limits<Int>::min())) return std::numeric_limits<Int>::min();
  if (truncated >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(truncated);
}

}  // namespace

void Elements::store(int64_t index, double value) const {
  char* at = base_ + offset_of(index) * static_cast<int64_t>(element_size(dtype_));
  switch (dtype_) {
    case ACL_FLOAT: {
      const float v = static_cast<float>(value);
      std::memcpy(at, &v, 4);
      break;
    }
    case ACL_DOUBLE: std::memcpy(at, &value, 8); break;
    case ACL_FLOAT16: {
      const uint16_t v = float_to_half(static_cast<float>(value));
      std::memcpy(at, &v, 2);
      break;
    }
    case ACL_BF16: {
      const uint16_t v = float_to_bf16(static_cast<float>(value));
      std::memcpy(at, &v, 2);
      break;
    }
    case ACL_INT32: {
      const int32_t v = to_integer<int32_t>(value);
      std::memcpy(at, &v, 4);
      break;
    }
    case ACL_INT64: {
      const int64_t v = to_integer<int64_t>(value);
      std::memcpy(at, &v, 8);
      break;
    }
    case ACL_INT8: *at = static_cast<char>(to_integer<int8_t>(value)); break;
    case ACL_UINT8: *at = static_cast<char>(to_integer<uint8_t>(value)); break;
    case ACL_BOOL: *at = value != 0 ? 1 : 0; break;
    default: throw Error(ACLNN_ERR_INNER, "unreachable data type");
  }
}

}  // namespace ascend_emulator
