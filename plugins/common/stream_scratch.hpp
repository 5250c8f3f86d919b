// Device memory for one operator's temporaries, ordered by a stream: taken with the plugin's
// stream-ordered allocation (mem_alloc_async's path) and given back in stream order when it goes out
// of scope, after the work that uses it has been enqueued. It never blocks, and the next operator on
// the stream reuses it at once. `Runtime` provides allocate_async(device, bytes, Stream&) and
// release_async(device, ptr, Stream&); `Stream` has a `device`.
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <vector>

#include "dtype_size.hpp"
#include "plugin_error.hpp"
#include "tensor_views.hpp"

namespace h2::plugin {

template <typename Stream, typename Runtime, Runtime& (*runtime_of)()>
class StreamScratch {
 public:
  StreamScratch(Stream& stream, size_t bytes) : stream_(stream) {
    if (bytes > 0) data_ = runtime_of().allocate_async(stream.device, bytes, stream);
  }
  ~StreamScratch() {
    if (data_ == nullptr) return;
    try {
      runtime_of().release_async(stream_.device, data_, stream_);
    } catch (const std::exception&) {
      // Only a failing runtime gets here; the memory stays with the vendor until the device resets.
    }
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* data() const { return data_; }

 private:
  Stream& stream_;
  void* data_ = nullptr;
};

// A contiguous H2_Tensor of `shape` and `dtype` in scratch memory of `stream`.
template <typename Stream, typename Runtime, Runtime& (*runtime_of)()>
struct ScratchTensor {
  ScratchTensor(Stream& stream, uint32_t dtype, const std::vector<int64_t>& shape)
      : memory(stream, std::max<size_t>(static_cast<size_t>(element_count(shape)) * checked_size(dtype), 1)), tensor{} {
    H2_Tensor t{};
    t.data = memory.data();
    t.dtype = dtype;
    tensor = reshaped(t, shape);
  }
  StreamScratch<Stream, Runtime, runtime_of> memory;
  H2_Tensor tensor;

 private:
  static size_t checked_size(uint32_t dtype) {
    const size_t bytes = dtype_size(dtype);
    if (bytes == 0) fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no size");
    return bytes;
  }
};

}  // namespace h2::plugin
