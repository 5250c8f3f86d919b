// The Ascend plugin's runtime half on the emulated CANN runtime, through the core's API: how it says
// that CANN or a device is missing, its devices, memory (capacity, injected failures, memory ordered
// by streams, device memory the host cannot read), copies from pageable and page-locked host memory,
// and a device that stops answering.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <vector>

#include "accelerator_runtime_checks.hpp"
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

TEST(AscendRuntime, CopiesFromPageableAndPinnedHostMemoryRoundTrip) {
  test::check_copies_round_trip("ascend");
}

// aclrtMemcpyAsync takes 64-byte aligned addresses only; the ABI's copies take any offsets (a slice,
// a chunk of a message), which go through aligned scratch and an aclnn byte copy.
TEST(AscendRuntime, CopiesAtAnyOffsetRoundTrip) {
  Runtime runtime(ascend_only());
  Device device = runtime.device("ascend", 0);
  Stream stream = device.create_stream();
  constexpr size_t kBytes = 1000;
  const std::vector<uint8_t> data = test::byte_pattern(kBytes, 11);
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

TEST(AscendRuntime, AnEventAfterACopyToPageableMemoryCompletesAfterTheBytesArrive) {
  test::check_event_after_pageable_copy("ascend");
}

TEST(AscendRuntime, MemoryFreedInStreamOrderIsReusedInStreamOrder) {
  test::check_stream_ordered_reuse("ascend");
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
  test::check_frees_after_a_stream_error(device, stream);
}

// The operators run through aclnn's two phases with workspaces from stream-ordered memory.
TEST(AscendRuntime, OperatorsComputeThroughAclnn) {
  test::check_operators_compute("ascend");
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
