// The Ascend plugin's runtime half on the emulated CANN runtime, through the core's API: how it says
// that CANN or a device is missing, its devices, memory (capacity, injected failures, memory ordered
// by streams, device memory the host cannot read), copies from pageable and page-locked host memory,
// and a device that stops answering.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using testing::AllOf;
using testing::HasSubstr;

RuntimeOptions ascend_only() {
  RuntimeOptions options;
  options.plugins = {"ascend"};
  return options;
}

const PluginInfo& ascend_info(const Runtime& runtime) {
  return runtime.plugins().at(0);
}

TEST(AscendRuntime, ReportsTheEmulatedDevicesAndTheirMemory) {
  test::ScopedEnv memory("ASCEND_EMULATOR_MEMORY", "256MiB");
  Runtime runtime(ascend_only());
  ASSERT_TRUE(ascend_info(runtime).loaded()) << ascend_info(runtime).message;
  ASSERT_EQ(runtime.devices().size(), 2u);
  const DeviceProperties& props = runtime.device("ascend", 1).properties();
  EXPECT_EQ(props.name, "Ascend910B3 (emulated)");
  EXPECT_EQ(props.vendor, "Huawei");
  EXPECT_EQ(props.kind, DeviceKind::npu);
  EXPECT_EQ(props.total_memory_bytes, uint64_t{256} << 20);
  EXPECT_FALSE(props.host_accessible);
}

TEST(AscendRuntime, VisibleDevicesFollowAscendRtVisibleDevices) {
  test::ScopedEnv visible("ASCEND_RT_VISIBLE_DEVICES", "1");
  Runtime runtime(ascend_only());
  EXPECT_EQ(runtime.devices().size(), 1u);
}

// In a fresh process: once a process has loaded a libascendcl.so, the loader finds it again by name.
TEST(AscendRuntimeDeathTest, WithoutCannTheVendorRuntimeIsNamedMissingWithHowToInstallIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        test::ScopedEnv home("ASCEND_HOME_PATH", "");
        test::ScopedEnv toolkit("ASCEND_TOOLKIT_HOME", "");
        Runtime runtime(ascend_only());
        std::fprintf(stderr, "%s\n", ascend_info(runtime).message.c_str());
        std::exit(ascend_info(runtime).state == PluginState::runtime_missing ? 0 : 1);
      },
      testing::ExitedWithCode(0),
      AllOf(HasSubstr("libascendcl.so was not found"),
            HasSubstr("install the CANN toolkit and source its set_env.sh")));
}

TEST(AscendRuntime, ADriverThatFindsNoDeviceIsNoDeviceNotAMissingRuntime) {
  test::ScopedEnv devices("ASCEND_EMULATOR_DEVICES", "0");
  Runtime runtime(ascend_only());
  EXPECT_EQ(ascend_info(runtime).state, PluginState::no_device);
  EXPECT_THAT(ascend_info(runtime).message, AllOf(HasSubstr("finds no Ascend device"), HasSubstr("npu-smi")));
}

TEST(AscendRuntime, AnUnknownOptionIsRefusedByName) {
  RuntimeOptions options = ascend_only();
  options.plugin_options["ascend"] = {{"precision", "hf32"}};
  Runtime runtime(options);
  EXPECT_EQ(ascend_info(runtime).state, PluginState::init_failed);
  EXPECT_THAT(ascend_info(runtime).message, HasSubstr("precision"));
}

TEST(AscendRuntime, OutOfMemoryNamesTheDeviceTheRequestAndWhatIsFree) {
  test::ScopedEnv memory("ASCEND_EMULATOR_MEMORY", "64MiB");
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  DeviceBuffer kept = device.allocate(32 << 20);
  try {
    device.allocate(48 << 20);
    FAIL() << "an allocation beyond the device's memory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("device 0 (Ascend910B3 (emulated)) cannot allocate 50331648 bytes"),
                                HasSubstr("of 67108864 bytes are free")));
  }
}

TEST(AscendRuntime, AnAllocationTheRuntimeRefusesIsOutOfMemory) {
  test::ScopedEnv fail("ASCEND_EMULATOR_FAIL", "malloc");
  Runtime runtime(ascend_only());
  try {
    runtime.device("ascend", 0).allocate(4096);
    FAIL() << "the injected allocation failure was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
  }
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t first) {
  std::vector<uint8_t> data(bytes);
  std::iota(data.begin(), data.end(), first);
  return data;
}

// Pageable memory goes through page-locked staging buffers and a stream callback, pinned memory
// straight to AscendCL; both must give the bytes back in stream order, for sizes below, at and above
// a staging buffer.
TEST(AscendRuntime, CopiesFromPageableAndPinnedHostMemoryRoundTrip) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{64} << 10, (size_t{3} << 20) + 5}) {
    const std::vector<uint8_t> data = pattern(bytes, static_cast<uint8_t>(bytes));
    DeviceBuffer buffer = device.allocate(bytes);
    stream.copy_from_host(buffer, data.data(), bytes);
    std::vector<uint8_t> back(bytes);
    stream.copy_to_host(back.data(), buffer, bytes);
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

// aclrtMemcpyAsync takes 64-byte aligned addresses only; the ABI's copies take any offsets (a slice,
// a chunk of a message), which go through aligned scratch and an aclnn byte copy.
TEST(AscendRuntime, CopiesAtAnyOffsetRoundTrip) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  constexpr size_t kBytes = 1000;
  const std::vector<uint8_t> data = pattern(kBytes, 11);
  DeviceBuffer a = device.allocate(4096), b = device.allocate(4096);
  stream.memset(a, 0);
  stream.copy_from_host(a, data.data() + 1, kBytes - 1, 3);  // unaligned on both sides
  stream.copy(b, 7, a, 3, kBytes - 1);                       // device to device, unaligned
  std::vector<uint8_t> back(kBytes + 1);
  stream.copy_to_host(back.data() + 1, b, kBytes - 1, 7);
  stream.synchronize();
  EXPECT_TRUE(std::equal(data.begin() + 1, data.end(), back.begin() + 1));
  PinnedHostBuffer pinned = device.allocate_pinned_host(kBytes);
  stream.copy_to_host(static_cast<uint8_t*>(pinned.data()) + 5, a, 100, 3);  // pinned but unaligned
  stream.synchronize();
  EXPECT_TRUE(std::equal(data.begin() + 1, data.begin() + 101, static_cast<const uint8_t*>(pinned.data()) + 5));
}

// A pageable copy to the host is complete once an event recorded after it has completed: the
// callback that moves the bytes out of the staging buffer blocks the stream.
TEST(AscendRuntime, AnEventAfterACopyToPageableMemoryCompletesAfterTheBytesArrive) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
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

// mem_alloc_async/mem_free_async: a block freed on a stream comes back for the same size, at once on
// that stream, and on another stream only after the work before the free (the new stream waits).
TEST(AscendRuntime, MemoryFreedInStreamOrderIsReusedInStreamOrder) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
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
  uint8_t seen = 0;
  std::vector<uint8_t> pinned_copy(1);
  PinnedHostBuffer host = device.allocate_pinned_host(1);
  ASSERT_EQ(api.memcpy_async(second.handle(), host.data(), taken, 1, H2_MEMCPY_DEVICE_TO_HOST), H2_STATUS_OK);
  second.synchronize();
  seen = *static_cast<const uint8_t*>(host.data());
  EXPECT_EQ(seen, 2) << "the other stream used the block before the work ahead of its free had run";
  ASSERT_EQ(api.mem_free(0, taken), H2_STATUS_OK);
}

TEST(AscendRuntime, TheCachingAllocatorRunsOnTheStreamOrderedSlots) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  for (int i = 0; i < 4; ++i) {
    DeviceBuffer temporary = device.allocate(1 << 20, stream);
    stream.memset(temporary, static_cast<uint8_t>(i));
  }
  stream.synchronize();
  EXPECT_GT(memory_stats(device).plugin_allocations, 0u);
}

TEST(AscendRuntime, ADeviceThatStopsAnsweringFailsItsStreamWithTheRuntimesText) {
  test::ScopedEnv fail("ASCEND_EMULATOR_FAIL", "lost_after=3");
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  DeviceBuffer buffer = device.allocate(4096);
  // The loss shows in the stream's error, or already in a later call once the device has gone.
  try {
    for (int i = 0; i < 5; ++i) stream.memset(buffer, static_cast<uint8_t>(i));
    stream.synchronize();
    FAIL() << "the lost device was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_DEVICE_ERROR);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("507010"), HasSubstr("stopped answering")));
  }
  EXPECT_THROW(stream.synchronize(), Error) << "a stream's error is sticky";
}

// An operator that fails on the device (an AI core exception) fails its stream, naming the aclnn
// operator, and the error is the device's, not an invalid argument.
TEST(AscendRuntime, AFailingOperatorFailsItsStreamNamingTheKernel) {
  test::ScopedEnv fail("ASCEND_EMULATOR_FAIL", "kernel=aclnnAdd");
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  const Tensor a = Tensor::from_host(stream, std::vector<double>{1, 2, 3}, {3}, DType::f32);
  const Tensor y = Tensor::empty(stream, {3}, DType::f32);
  ops::add(stream, a, a, y);
  try {
    stream.synchronize();
    FAIL() << "the failing kernel was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_DEVICE_ERROR);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("507015"), HasSubstr("aclnnAdd")));
  }
  // Frees wait for the streams but do not fail on a stream's own error: that stays the stream's.
  const H2_PluginApi& api = device.plugin_api();
  void* pinned = nullptr;
  void* memory = nullptr;
  ASSERT_EQ(api.host_alloc(64, &pinned), H2_STATUS_OK);
  ASSERT_EQ(api.mem_alloc(0, 64, &memory), H2_STATUS_OK);
  EXPECT_EQ(api.host_free(pinned), H2_STATUS_OK) << api.last_error();
  EXPECT_EQ(api.mem_free(0, memory), H2_STATUS_OK) << api.last_error();
  EXPECT_THROW(stream.synchronize(), Error) << "the stream's error is still its own";
}

// The operators run through aclnn's two phases with workspaces from stream-ordered memory: a small
// chain (gemm with bias in f16, f32 accumulation, elementwise) gives the values computed by hand.
TEST(AscendRuntime, OperatorsComputeThroughAclnn) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
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

TEST(AscendRuntimeDeathTest, HostCodeCannotReadDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Runtime runtime(ascend_only());
        DeviceBuffer buffer = runtime.device("ascend", 0).allocate(4096);
        std::printf("%d\n", *static_cast<volatile const char*>(buffer.data()));
      },
      "");
}

}  // namespace
}  // namespace h2
