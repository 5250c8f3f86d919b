#include "h2/tensor.hpp"

#include <cstring>
#include <numeric>

#include "h2/error.hpp"
#include "h2/half.hpp"
#include "h2/ops.hpp"
#include "h2/plugin_abi.h"
#include "h2/stream.hpp"

namespace h2 {

namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(H2_STATUS_INVALID_ARGUMENT, message);
}

// One host value as the bytes of `dtype`.
void encode(double value, DType dtype, void* out) {
  switch (dtype) {
    case DType::f64: std::memcpy(out, &value, 8); return;
    case DType::f32: {
      const auto v = static_cast<float>(value);
      std::memcpy(out, &v, 4);
      return;
    }
    case DType::f16:
    case DType::bf16: {
      const auto f = static_cast<float>(value);
      const uint16_t bits = dtype == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
      std::memcpy(out, &bits, 2);
      return;
    }
    case DType::i32: {
      const auto v = static_cast<int32_t>(value);
      std::memcpy(out, &v, 4);
      return;
    }
    case DType::i64: {
      const auto v = static_cast<int64_t>(value);
      std::memcpy(out, &v, 8);
      return;
    }
    case DType::u8:
    case DType::boolean: *static_cast<uint8_t*>(out) = static_cast<uint8_t>(value); return;
  }
}

double decode(const void* in, DType dtype) {
  switch (dtype) {
    case DType::f64: {
      double v;
      std::memcpy(&v, in, 8);
      return v;
    }
    case DType::f32: {
      float v;
      std::memcpy(&v, in, 4);
      return v;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t bits;
      std::memcpy(&bits, in, 2);
      return dtype == DType::f16 ? f16_to_f32(bits) : bf16_to_f32(bits);
    }
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, in, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, in, 8);
      return static_cast<double>(v);
    }
    case DType::u8:
    case DType::boolean: return *static_cast<const uint8_t*>(in);
  }
  return 0;
}

}  // namespace

std::string shape_string(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

int64_t shape_numel(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(shape[i], 1);
  }
  return strides;
}

Tensor::Tensor(std::shared_ptr<DeviceBuffer> storage, int64_t offset, DType dtype, Shape shape, Shape strides)
    : storage_(std::move(storage)),
      offset_(offset),
      dtype_(dtype),
      shape_(std::move(shape)),
      strides_(std::move(strides)) {
  if (shape_.size() > H2_MAX_RANK)
    invalid("a tensor has at most " + std::to_string(H2_MAX_RANK) + " dimensions, not " +
            std::to_string(shape_.size()));
}

namespace {
// Bytes of a new contiguous tensor (at least one element: allocators take no empty requests).
size_t checked_bytes(const Shape& shape, DType dtype) {
  for (int64_t size : shape)
    if (size < 0) invalid("tensor shape " + shape_string(shape) + " has a negative size");
  if (shape.size() > H2_MAX_RANK) invalid("tensor shape " + shape_string(shape) + " has more than 8 dimensions");
  return static_cast<size_t>(std::max<int64_t>(shape_numel(shape), 1)) * dtype_size(dtype);
}
}  // namespace

Tensor Tensor::empty(const Stream& stream, Shape shape, DType dtype) {
  const size_t bytes = checked_bytes(shape, dtype);
  auto storage = std::make_shared<DeviceBuffer>(stream.device().allocate(bytes, stream));
  Shape strides = contiguous_strides(shape);
  return Tensor(std::move(storage), 0, dtype, std::move(shape), std::move(strides));
}

Tensor Tensor::empty(const Device& device, Shape shape, DType dtype) {
  const size_t bytes = checked_bytes(shape, dtype);
  auto storage = std::make_shared<DeviceBuffer>(device.allocate(bytes));
  Shape strides = contiguous_strides(shape);
  return Tensor(std::move(storage), 0, dtype, std::move(shape), std::move(strides));
}

void Tensor::record_stream(const Stream& stream) const {
  if (!storage_) invalid("record_stream: the tensor is undefined");
  storage_->record_stream(stream);
}

Tensor Tensor::from_buffer(std::shared_ptr<DeviceBuffer> storage, int64_t offset, DType dtype, Shape shape,
                           Shape strides) {
  if (!storage) invalid("Tensor::from_buffer: no buffer");
  if (strides.size() != shape.size())
    invalid("Tensor::from_buffer: " + shape_string(shape) + " has " + std::to_string(strides.size()) + " strides");
  if (offset < 0) invalid("Tensor::from_buffer: a negative offset");
  int64_t last = offset;
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0 || strides[d] < 0)
      invalid("Tensor::from_buffer: " + shape_string(shape) + " with strides " + shape_string(strides) +
              " has a negative size or stride");
    if (shape[d] == 0) empty = true;
    last += (shape[d] - 1) * strides[d];
  }
  const size_t reach = empty ? 0 : static_cast<size_t>(last + 1) * dtype_size(dtype);
  if (reach > storage->size())
    invalid("Tensor::from_buffer: " + shape_string(shape) + " of " + std::string(dtype_name(dtype)) + " with strides " +
            shape_string(strides) + " at offset " + std::to_string(offset) + " reaches byte " + std::to_string(reach) +
            ", the buffer has " + std::to_string(storage->size()));
  return Tensor(std::move(storage), offset, dtype, std::move(shape), std::move(strides));
}

Tensor Tensor::from_buffer(std::shared_ptr<DeviceBuffer> storage, Shape shape, DType dtype) {
  for (int64_t size : shape)
    if (size < 0) invalid("tensor shape " + shape_string(shape) + " has a negative size");
  if (shape.size() > H2_MAX_RANK) invalid("tensor shape " + shape_string(shape) + " has more than 8 dimensions");
  if (!storage) invalid("Tensor::from_buffer: no buffer");
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  if (bytes > storage->size())
    invalid("Tensor::from_buffer: " + shape_string(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
            std::to_string(bytes) + " bytes, the buffer has " + std::to_string(storage->size()));
  Shape strides = contiguous_strides(shape);
  return Tensor(std::move(storage), 0, dtype, std::move(shape), std::move(strides));
}

Tensor Tensor::from_host(Stream& stream, std::span<const double> values, Shape shape, DType dtype) {
  Tensor tensor = empty(stream, std::move(shape), dtype);
  tensor.copy_from_host(stream, values);
  return tensor;
}

const Device& Tensor::device() const {
  if (!storage_) invalid("the tensor is undefined");
  return storage_->device();
}

int Tensor::normalize_dim(int dim, int rank, const char* what) const {
  const int normalized = dim < 0 ? dim + rank : dim;
  if (normalized < 0 || normalized >= rank)
    invalid(std::string(what) + ": dimension " + std::to_string(dim) + " is out of range for " + describe());
  return normalized;
}

int64_t Tensor::size(int dim) const {
  return shape_[static_cast<size_t>(normalize_dim(dim, rank(), "size"))];
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // no elements: any strides describe them
  int64_t expected = 1;
  for (size_t i = shape_.size(); i-- > 0;) {
    if (shape_[i] != 1 && strides_[i] != expected) return false;
    expected *= shape_[i];
  }
  return true;
}

void* Tensor::data() const {
  if (!storage_) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
}

std::string Tensor::describe() const {
  if (!storage_) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_string(shape_);
}

std::vector<double> Tensor::to_host(Stream& stream) const {
  if (!storage_) invalid("to_host: the tensor is undefined");
  Tensor dense = *this;
  if (!is_contiguous()) {
    dense = empty(stream, shape_, dtype_);
    ops::copy(stream, *this, dense);
  }
  const size_t element = dtype_size(dtype_);
  std::vector<unsigned char> bytes(static_cast<size_t>(numel()) * element);
  stream.copy_to_host(bytes.data(), *dense.storage_, bytes.size(), static_cast<size_t>(dense.offset_) * element);
  stream.synchronize();
  std::vector<double> values(static_cast<size_t>(numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = decode(&bytes[i * element], dtype_);
  return values;
}

void Tensor::copy_from_host(Stream& stream, std::span<const double> values) const {
  if (!storage_) invalid("copy_from_host: the tensor is undefined");
  if (!is_contiguous()) invalid("copy_from_host: " + describe() + " is not contiguous");
  if (static_cast<int64_t>(values.size()) != numel())
    invalid("copy_from_host: " + std::to_string(values.size()) + " values for " + describe());
  const size_t element = dtype_size(dtype_);
  std::vector<unsigned char> bytes(values.size() * element);
  for (size_t i = 0; i < values.size(); ++i) encode(values[i], dtype_, &bytes[i * element]);
  stream.copy_from_host(*storage_, bytes.data(), bytes.size(), static_cast<size_t>(offset_) * element);
  stream.synchronize();  // `bytes` is borrowed until the copy has completed
}

Tensor Tensor::view(Shape shape) const {
  if (!is_contiguous()) invalid("view: " + describe() + " is not contiguous; copy it first");
  if (shape_numel(shape) != numel())
    invalid("view: " + describe() + " has " + std::to_string(numel()) + " elements, " + shape_string(shape) + " has " +
            std::to_string(shape_numel(shape)));
  Shape strides = contiguous_strides(shape);
  return Tensor(storage_, offset_, dtype_, std::move(shape), std::move(strides));
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  if (order.size() != shape_.size())
    invalid("permute: " + std::to_string(order.size()) + " dimensions given for " + describe());
  Shape shape(order.size()), strides(order.size());
  std::vector<bool> used(order.size(), false);
  for (size_t i = 0; i < order.size(); ++i) {
    const int d = normalize_dim(order[i], rank(), "permute");
    if (used[static_cast<size_t>(d)]) invalid("permute: dimension " + std::to_string(d) + " appears twice");
    used[static_cast<size_t>(d)] = true;
    shape[i] = shape_[static_cast<size_t>(d)];
    strides[i] = strides_[static_cast<size_t>(d)];
  }
  return Tensor(storage_, offset_, dtype_, std::move(shape), std::move(strides));
}

Tensor Tensor::transpose(int dim0, int dim1) const {
  std::vector<int> order(shape_.size());
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[static_cast<size_t>(normalize_dim(dim0, rank(), "transpose"))],
            order[static_cast<size_t>(normalize_dim(dim1, rank(), "transpose"))]);
  return permute(order);
}

Tensor Tensor::slice(int dim, int64_t start, int64_t end) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, rank(), "slice"));
  if (start < 0 || end < start || end > shape_[d])
    invalid("slice: [" + std::to_string(start) + ", " + std::to_string(end) + ") is outside dimension " +
            std::to_string(d) + " of " + describe());
  Shape shape = shape_;
  shape[d] = end - start;
  return Tensor(storage_, offset_ + start * strides_[d], dtype_, std::move(shape), strides_);
}

Tensor Tensor::select(int dim, int64_t index) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, rank(), "select"));
  if (index < 0 || index >= shape_[d])
    invalid("select: index " + std::to_string(index) + " is outside dimension " + std::to_string(d) + " of " +
            describe());
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(d));
  strides.erase(strides.begin() + static_cast<std::ptrdiff_t>(d));
  return Tensor(storage_, offset_ + index * strides_[d], dtype_, std::move(shape), std::move(strides));
}

Tensor Tensor::unsqueeze(int dim) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, rank() + 1, "unsqueeze"));
  Shape shape = shape_, strides = strides_;
  const int64_t stride = d < strides_.size() ? strides_[d] * shape_[d] : 1;
  shape.insert(shape.begin() + static_cast<std::ptrdiff_t>(d), 1);
  strides.insert(strides.begin() + static_cast<std::ptrdiff_t>(d), stride);
  return Tensor(storage_, offset_, dtype_, std::move(shape), std::move(strides));
}

Tensor Tensor::squeeze(int dim) const {
  const auto d = static_cast<size_t>(normalize_dim(dim, rank(), "squeeze"));
  if (shape_[d] != 1) invalid("squeeze: dimension " + std::to_string(d) + " of " + describe() + " is not 1");
  return select(static_cast<int>(d), 0);
}

Tensor Tensor::expand(const Shape& shape) const {
  if (shape.size() < shape_.size())
    invalid("expand: " + describe() + " cannot expand to fewer dimensions " + shape_string(shape));
  const size_t lead = shape.size() - shape_.size();
  Shape strides(shape.size(), 0);
  for (size_t i = 0; i < shape_.size(); ++i) {
    const int64_t want = shape[lead + i];
    if (shape_[i] == want) {
      strides[lead + i] = strides_[i];
    } else if (shape_[i] != 1) {
      invalid("expand: " + describe() + " cannot expand to " + shape_string(shape) + " (dimension " +
              std::to_string(i) + " is " + std::to_string(shape_[i]) + ", not 1)");
    }
  }
  return Tensor(storage_, offset_, dtype_, shape, std::move(strides));
}

H2_Tensor Tensor::descriptor() const {
  H2_Tensor t{};  // value-initialised: unused dimensions are 0, as the ABI asks
  if (!storage_) return t;
  t.data = static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(dtype_size(dtype_));
  t.dtype = static_cast<uint32_t>(dtype_);
  t.rank = static_cast<uint32_t>(shape_.size());
  std::copy(shape_.begin(), shape_.end(), t.shape);
  std::copy(strides_.begin(), strides_.end(), t.strides);
  return t;
}

bool Tensor::same_view(const Tensor& other) const {
  return storage_ == other.storage_ && offset_ == other.offset_ && dtype_ == other.dtype_ && shape_ == other.shape_ &&
         strides_ == other.strides_;
}

}  // namespace h2
