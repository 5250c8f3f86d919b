// h2::Tensor: a strided view of device memory on one device (shape, strides in elements, dtype).
// Copies of a Tensor are views of the same memory, which lives as long as any view does. View
// operations (permute, slice, expand, ...) never copy; ops::copy makes a view contiguous.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "h2/buffer.hpp"
#include "h2/device.hpp"
#include "h2/dtype.hpp"

struct H2_Tensor;

namespace h2 {

class Stream;

using Shape = std::vector<int64_t>;

// "[64, 32]"
std::string shape_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);
// Row-major strides of a contiguous tensor of `shape`.
Shape contiguous_strides(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;  // undefined: stands for an absent optional tensor

  // A new contiguous tensor for work on `stream`; the contents are unspecified. Its memory comes from
  // the device's caching allocator and goes back to it, without waiting, when the last view dies;
  // work on another stream that uses it must be declared with record_stream. For every temporary.
  static Tensor empty(const Stream& stream, Shape shape, DType dtype);
  // The same with memory straight from the plugin, whose free waits for all queued work: for tensors
  // that several streams (or a NIC) use without record_stream, and that are seldom freed.
  static Tensor empty(const Device& device, Shape shape, DType dtype);
  // A contiguous tensor over the start of existing device memory, which must hold it (for buffers a
  // library reuses between calls, such as DiComm's scratch).
  static Tensor from_buffer(std::shared_ptr<DeviceBuffer> storage, Shape shape, DType dtype);
  // A strided view of existing device memory: element (i0, i1, ...) at `offset` + sum(i_d strides[d])
  // elements from the buffer's start (for frameworks that keep their own storage and views, such as
  // DiTorch). Every element it reaches must lie in the buffer; strides are >= 0.
  static Tensor from_buffer(std::shared_ptr<DeviceBuffer> storage, int64_t offset, DType dtype, Shape shape,
                            Shape strides);
  // A new contiguous tensor holding `values` rounded to `dtype` (fp16 and bf16 through fp32).
  // Blocks until the data is on the device.
  static Tensor from_host(Stream& stream, std::span<const double> values, Shape shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  const Device& device() const;
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t size(int dim) const;  // negative dims count from the end
  int64_t numel() const { return shape_numel(shape_); }
  bool is_contiguous() const;
  // The device pointer of element (0, ..., 0).
  void* data() const;
  // "bf16[4, 8]" for messages.
  std::string describe() const;

  // All elements in row-major order as fp64; blocks until they are on the host.
  std::vector<double> to_host(Stream& stream) const;
  // Overwrites this (contiguous) tensor with `values`; blocks until done.
  void copy_from_host(Stream& stream, std::span<const double> values) const;

  // ---- Views ----
  Tensor view(Shape shape) const;  // same elements, new shape; needs a contiguous tensor
  Tensor permute(const std::vector<int>& order) const;
  Tensor transpose(int dim0, int dim1) const;
  Tensor slice(int dim, int64_t start, int64_t end) const;  // [start, end) along dim
  Tensor select(int dim, int64_t index) const;              // drops dim
  Tensor unsqueeze(int dim) const;
  Tensor squeeze(int dim) const;            // dim must have size 1
  Tensor expand(const Shape& shape) const;  // size-1 dims repeat (stride 0); new leading dims allowed

  // Work on `stream` (not the one the tensor was made for) uses this tensor's memory: freeing it
  // waits for that work. See DeviceBuffer::record_stream.
  void record_stream(const Stream& stream) const;

  // The ABI descriptor of this view (data NULL when undefined).
  H2_Tensor descriptor() const;
  // True when both views cover exactly the same elements in the same order with the same dtype.
  bool same_view(const Tensor& other) const;
  // The storage this view belongs to (views of one buffer share it).
  const DeviceBuffer* storage() const { return storage_.get(); }
  // The same, for stream-level copies of the whole storage.
  const std::shared_ptr<DeviceBuffer>& buffer() const { return storage_; }
  int64_t offset() const { return offset_; }  // in elements, from the start of the storage

 private:
  Tensor(std::shared_ptr<DeviceBuffer> storage, int64_t offset, DType dtype, Shape shape, Shape strides);
  int normalize_dim(int dim, int rank, const char* what) const;

  std::shared_ptr<DeviceBuffer> storage_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
  Shape shape_;
  Shape strides_;
};

}  // namespace h2
