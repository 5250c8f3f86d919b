// Checks every accelerator plugin's runtime half must pass, through the core's API, written once for
// the plugins' own tests (plugins/<vendor>/tests) to run on their emulated vendor runtimes: copies
// from pageable and page-locked host memory at any offset, an event after a copy to pageable memory,
// memory freed in stream order reused in stream order, a small chain of operators, and frees that do
// not fail on a stream's own error.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "h2/h2.hpp"

namespace h2::test {

inline RuntimeOptions only_plugin(const std::string& plugin) {
  RuntimeOptions options;
  options.plugins = {plugin};
  return options;
}

inline std::vector<uint8_t> byte_pattern(size_t bytes, uint8_t first) {
  std::vector<uint8_t> data(bytes);
  std::iota(data.begin(), data.end(), first);
  return data;
}

// Pageable memory goes through page-locked staging buffers, pinned memory straight to the vendor;
// both give the bytes back in stream order, below, at and above a staging buffer's size, at an offset.
inline void check_copies_round_trip(const std::string& plugin) {
  Runtime runtime(only_plugin(plugin));
  Device device = runtime.device(plugin, 0);
  Stream stream = device.create_stream();
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{64} << 10, (size_t{3} << 20) + 5}) {
    const std::vector<uint8_t> data = byte_pattern(bytes, static_cast<uint8_t>(bytes));
    DeviceBuffer buffer = device.allocate(bytes + 8);
    stream.copy_from_host(buffer, data.data(), bytes, 3);
    std::vector<uint8_t> back(bytes);
    stream.copy_to_host(back.data(), buffer, bytes, 3);
    stream.synchronize();
    EXPECT_EQ(back, data) << "pageable, " << bytes << " bytes";

    PinnedHostBuffer pinned = device.allocate_pinned_host(bytes);
    stream.memset(buffer, 7);
    stream.copy_to_host(pinned.data(), buffer, bytes);
    stream.synchronize();
    const auto* host = static_cast<const uint8_t*>(pinned.data());
    EXPECT_TRUE(std::all_of(host, host + bytes, [](uint8_t v) { return v == 7; })) << "pinned, " << bytes << " bytes";
  }
}

// A pageable copy to the host is complete once an event recorded after it has completed: the host
// call that moves the bytes out of the staging buffer holds the stream.
inline void check_event_after_pageable_copy(const std::string& plugin) {
  Runtime runtime(only_plugin(plugin));
  Device device = runtime.device(plugin, 0);
  Stream stream = device.create_stream();
  constexpr size_t kBytes = size_t{8} << 20;
  DeviceBuffer buffer = device.allocate(kBytes);
  for (int round = 0; round < 20; ++round) {
    std::vector<uint8_t> back(kBytes, 0);
    stream.memset(buffer, static_cast<uint8_t>(round + 1));
    stream.copy_to_host(back.data(), buffer, kBytes);
    Event copied = device.create_event();
    copied.record(stream);
    copied.synchronize();
    ASSERT_EQ(back.front(), round + 1);
    ASSERT_EQ(back.back(), round + 1) << "round " << round;
  }
}

// mem_alloc_async/mem_free_async: a block freed on a stream comes back for the same size at once on
// that stream, and on another stream only after the work before the free.
inline void check_stream_ordered_reuse(const std::string& plugin) {
  Runtime runtime(only_plugin(plugin));
  Device device = runtime.device(plugin, 0);
  const H2_PluginApi& api = device.plugin_api();
  Stream first = device.create_stream();
  Stream second = device.create_stream();
  constexpr size_t kBytes = size_t{32} << 20;
  void* block = nullptr;
  ASSERT_EQ(api.mem_alloc_async(0, kBytes, first.handle(), &block), H2_STATUS_OK);
  ASSERT_EQ(api.mem_free_async(0, block, first.handle()), H2_STATUS_OK);
  void* again = nullptr;
  ASSERT_EQ(api.mem_alloc_async(0, kBytes, first.handle(), &again), H2_STATUS_OK);
  EXPECT_EQ(again, block) << "a block freed on a stream is not reused on it";
  // Slow work on `first` writes 1s, then frees; `second` takes the block and writes 2 to one byte.
  for (int i = 0; i < 8; ++i) ASSERT_EQ(api.memset_async(first.handle(), again, 1, kBytes), H2_STATUS_OK);
  ASSERT_EQ(api.mem_free_async(0, again, first.handle()), H2_STATUS_OK);
  void* taken = nullptr;
  ASSERT_EQ(api.mem_alloc_async(0, kBytes, second.handle(), &taken), H2_STATUS_OK);
  EXPECT_EQ(taken, block);
  ASSERT_EQ(api.memset_async(second.handle(), taken, 2, 1), H2_STATUS_OK);
  PinnedHostBuffer host = device.allocate_pinned_host(1);
  ASSERT_EQ(api.memcpy_async(second.handle(), host.data(), taken, 1, H2_MEMCPY_DEVICE_TO_HOST), H2_STATUS_OK);
  second.synchronize();
  EXPECT_EQ(*static_cast<const uint8_t*>(host.data()), 2)
      << "the other stream used the block before the work ahead of its free had run";
  ASSERT_EQ(api.mem_free(0, taken), H2_STATUS_OK);
}

// gemm with bias in f16 (accumulated in f32), an elementwise add and a fill give the values computed
// by hand.
inline void check_operators_compute(const std::string& plugin) {
  Runtime runtime(only_plugin(plugin));
  Device device = runtime.device(plugin, 0);
  Stream stream = device.create_stream();
  const Tensor a = Tensor::from_host(stream, std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f16);
  const Tensor b = Tensor::from_host(stream, std::vector<double>{5, 6, 7, 8}, {2, 2}, DType::f16);
  const Tensor bias = Tensor::from_host(stream, std::vector<double>{0.5, -0.5}, {2}, DType::f16);
  const Tensor c = Tensor::empty(stream, {2, 2}, DType::f16);
  ops::gemm(stream, a, b, c, {}, bias);
  EXPECT_EQ(c.to_host(stream), (std::vector<double>{19.5, 21.5, 43.5, 49.5}));
  const Tensor sum = Tensor::empty(stream, {2, 2}, DType::f16);
  ops::add(stream, c, c, sum);
  ops::fill(stream, c, 0.25);
  EXPECT_EQ(sum.to_host(stream), (std::vector<double>{39, 43, 87, 99}));
  EXPECT_EQ(c.to_host(stream), (std::vector<double>(4, 0.25)));
}

// After `stream` failed: frees wait for the streams but do not fail on a stream's own error, which
// stays the stream's.
inline void check_frees_after_a_stream_error(Device& device, Stream& stream) {
  const H2_PluginApi& api = device.plugin_api();
  void* pinned = nullptr;
  void* memory = nullptr;
  ASSERT_EQ(api.host_alloc(64, &pinned), H2_STATUS_OK);
  ASSERT_EQ(api.mem_alloc(0, 64, &memory), H2_STATUS_OK);
  EXPECT_EQ(api.host_free(pinned), H2_STATUS_OK) << api.last_error();
  EXPECT_EQ(api.mem_free(0, memory), H2_STATUS_OK) << api.last_error();
  EXPECT_THROW(stream.synchronize(), Error) << "the stream's error is still its own";
}

}  // namespace h2::test
