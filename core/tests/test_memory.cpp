// Device and pinned host memory on the cpu-reference plugin: capacity limits with clear errors,
// reuse after free, and strict mode, where host code must not touch device memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using testing::HasSubstr;

TEST(Memory, AllocationBeyondCapacityFailsCleanlyAndNamesWhatIsFree) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "64MiB");
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  DeviceBuffer held = device.allocate(40 << 20);
  try {
    device.allocate(30 << 20);
    FAIL() << "30 MiB more must not fit in 64 MiB with 40 MiB held";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), HasSubstr("cpu-reference: mem_alloc(device 0"));
    EXPECT_THAT(e.what(), HasSubstr("device 0 out of memory: requested 30.00 MiB, 24.00 MiB free of 64.00 MiB"));
  }
  // The failure changed nothing: what is free is still usable, and freeing makes room again.
  EXPECT_EQ(device.memory_info().free_bytes, 24u << 20);
  DeviceBuffer fits = device.allocate(24 << 20);
  held.reset();
  fits.reset();
  DeviceBuffer whole = device.allocate(64 << 20);
  EXPECT_EQ(device.memory_info().free_bytes, 0u);
}

TEST(Memory, FragmentationIsExplained) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "4MiB");
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  std::vector<DeviceBuffer> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(device.allocate(1 << 20));
  blocks[0].reset();
  blocks[2].reset();
  EXPECT_THAT([&] { device.allocate(2 << 20); },
              testing::ThrowsMessage<Error>(HasSubstr("fragmented: the largest free block is 1.00 MiB")));
  blocks[1].reset();  // merges with its free neighbours into 3 MiB
  EXPECT_NO_THROW(device.allocate(3 << 20));
}

TEST(Memory, DeviceCapacitiesAreEnforcedPerDevice) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "8MiB,32MiB");
  Runtime runtime(test::cpu_reference_only());
  EXPECT_THROW(runtime.device("cpu-reference", 0).allocate(16 << 20), Error);
  EXPECT_NO_THROW(runtime.device("cpu-reference", 1).allocate(16 << 20));
}

TEST(Memory, FreeingWaitsForQueuedWork) {
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  std::vector<uint8_t> host(64 << 20, 5);
  {
    DeviceBuffer buffer = device.allocate(host.size());
    stream.copy_from_host(buffer, host.data(), host.size());
    stream.memset(buffer, 9);
  }  // freed here while the work may still be queued: mem_free must wait for it
  EXPECT_TRUE(stream.ready());
}

TEST(Memory, PinnedHostMemoryIsHostAccessibleAndCopies) {
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  PinnedHostBuffer pinned = device.allocate_pinned_host(1 << 16);
  std::memset(pinned.data(), 0x5a, pinned.size());
  DeviceBuffer buffer = device.allocate(pinned.size());
  stream.copy_from_host(buffer, pinned.data(), pinned.size());
  stream.synchronize();  // the source is borrowed until the copy completes
  std::memset(pinned.data(), 0, pinned.size());
  stream.copy_to_host(pinned.data(), buffer, pinned.size());
  stream.synchronize();
  const auto* bytes = static_cast<const uint8_t*>(pinned.data());
  EXPECT_TRUE(std::all_of(bytes, bytes + pinned.size(), [](uint8_t v) { return v == 0x5a; }));
}

TEST(Memory, DeviceMemoryPassedAsHostMemoryIsRejected) {
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  DeviceBuffer a = device.allocate(256);
  DeviceBuffer b = device.allocate(256);
  EXPECT_THAT(
      [&] { stream.copy_from_host(a, b.data(), 256); },
      testing::ThrowsMessage<Error>(HasSubstr("source is device memory but the copy kind says it is host memory")));
}

// A training loop's temporaries: after the first iteration every tensor comes from the cache, and
// the values are right although each iteration reuses the memory the last one freed.
TEST(CachingAllocator, TemporariesOfAStreamCostNoPluginCallsAfterTheFirstIteration) {
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  uint64_t after_first = 0;
  for (int iteration = 0; iteration < 5; ++iteration) {
    Tensor a = Tensor::empty(stream, {256, 64}, DType::f32);
    Tensor b = Tensor::empty(stream, {256, 64}, DType::f32);
    ops::fill(stream, a, iteration);
    ops::fill(stream, b, 2.0);
    Tensor sum = Tensor::empty(stream, {256, 64}, DType::f32);
    ops::add(stream, a, b, sum);
    EXPECT_EQ(sum.to_host(stream).back(), iteration + 2.0);
    if (iteration == 0) after_first = memory_stats(device).plugin_allocations;
  }
  const MemoryStats stats = memory_stats(device);
  EXPECT_TRUE(stats.caching);
  EXPECT_EQ(stats.plugin_allocations, after_first);
  EXPECT_EQ(stats.allocations, 15u);
  EXPECT_EQ(stats.cache_hits, stats.allocations - stats.plugin_allocations);
  EXPECT_EQ(stats.allocated_bytes, 0u);
  empty_cache(device);
  EXPECT_EQ(memory_stats(device).reserved_bytes, 0u);
}

TEST(CachingAllocator, UnderH2AllocatorPluginEveryTensorIsAStreamOrderedPluginAllocation) {
  test::ScopedEnv off("H2_ALLOCATOR", "plugin");
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "8MiB");
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  {
    Tensor a = Tensor::empty(stream, {1000}, DType::f32);
    ops::fill(stream, a, 1.0);
    // The plugin sees exactly the tensor's bytes, not a segment.
    EXPECT_EQ(device.memory_info().free_bytes, (8u << 20) - 4096u);
  }
  stream.synchronize();  // mem_free_async returns the memory when the stream reaches it
  EXPECT_EQ(device.memory_info().free_bytes, 8u << 20);
  const MemoryStats stats = memory_stats(device);
  EXPECT_FALSE(stats.caching);
  EXPECT_EQ(stats.plugin_allocations, 1u);
  EXPECT_EQ(stats.plugin_frees, 1u);
}

TEST(CachingAllocator, RunningOutOfMemoryNamesTheDeviceTheRequestAndTheCache) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "24MiB");
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  Tensor held = Tensor::empty(stream, {3 << 20}, DType::u8);
  Stream other = device.create_stream();
  EXPECT_THAT([&] { Tensor::empty(other, {8 << 20}, DType::u8); },
              testing::ThrowsMessage<Error>(
                  testing::AllOf(HasSubstr("cpu-reference:0: out of memory: 8.00 MiB for a buffer do not fit"),
                                 HasSubstr("buffers hold 3.00 MiB, the cache holds 17.00 MiB"),
                                 HasSubstr("the device has 4.00 MiB free of 24.00 MiB"))));
}

// cpu-reference's mem_free_async: work enqueued after the free on the freed memory is refused, as
// strict mode refuses host access, instead of reading memory that may already be someone else's.
TEST(CachingAllocator, CpuReferenceRefusesWorkOnMemoryFreedInStreamOrder) {
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  Stream stream = device.create_stream();
  const H2_PluginApi& api = device.plugin_api();
  void* ptr = nullptr;
  ASSERT_EQ(api.mem_alloc_async(0, 4096, stream.handle(), &ptr), H2_STATUS_OK);
  ASSERT_EQ(api.memset_async(stream.native(), ptr, 1, 4096), H2_STATUS_OK);
  ASSERT_EQ(api.mem_free_async(0, ptr, stream.handle()), H2_STATUS_OK);
  EXPECT_EQ(api.memset_async(stream.native(), ptr, 2, 4096), H2_STATUS_INVALID_ARGUMENT);
  // Refused as freed while the stream has not reached the free yet, or as no allocation once it has.
  EXPECT_THAT(api.last_error(), testing::AnyOf(HasSubstr("already freed with mem_free_async (a use after free)"),
                                               HasSubstr("is not inside a live allocation")));
  EXPECT_EQ(api.mem_free(0, ptr), H2_STATUS_INVALID_ARGUMENT);  // and it cannot be freed twice
  stream.synchronize();
  EXPECT_EQ(device.memory_info().free_bytes, device.memory_info().total_bytes);
}

TEST(StrictMode, DevicePointersAreNotHostAccessible) {
  test::ScopedEnv strict("H2_CPU_REFERENCE_STRICT", "1");
  Runtime runtime(test::cpu_reference_only());
  Device device = runtime.device("cpu-reference", 0);
  EXPECT_FALSE(device.properties().host_accessible);
  // Plugin calls still work through the device pointers.
  Stream stream = device.create_stream();
  DeviceBuffer buffer = device.allocate(4096);
  stream.memset(buffer, 0x11);
  std::vector<uint8_t> host(4096);
  stream.copy_to_host(host.data(), buffer, host.size());
  stream.synchronize();
  EXPECT_EQ(host[4095], 0x11);
}

TEST(StrictModeDeathTest, HostDereferenceOfDeviceMemoryStopsWithAClearMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::ScopedEnv strict("H2_CPU_REFERENCE_STRICT", "1");
  EXPECT_DEATH(
      {
        Runtime runtime(test::cpu_reference_only());
        DeviceBuffer buffer = runtime.device("cpu-reference", 0).allocate(64);
        volatile uint8_t* bytes = static_cast<volatile uint8_t*>(buffer.data());
        bytes[3] = 1;  // the bug strict mode exists to catch
      },
      "strict mode\\): host code dereferenced device memory of device 0");
}

// A tensor's memory cached after its free is still device memory: reading it from the host (a use
// after free of a stale pointer) stops as any host access does.
TEST(StrictModeDeathTest, HostReadOfAFreedCachedTensorStopsWithAClearMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::ScopedEnv strict("H2_CPU_REFERENCE_STRICT", "1");
  EXPECT_DEATH(
      {
        Runtime runtime(test::cpu_reference_only());
        Stream stream = runtime.device("cpu-reference", 0).create_stream();
        void* stale = nullptr;
        {
          Tensor tensor = Tensor::empty(stream, {16}, DType::f32);
          stale = tensor.data();
        }
        volatile float value = *static_cast<volatile float*>(stale);
        (void)value;
      },
      "strict mode\\): host code dereferenced device memory of device 0");
}

}  // namespace
}  // namespace h2
