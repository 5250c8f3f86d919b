// The MLU plugin's runtime half on the emulated Neuware runtime, through the core's API: how it says
// that Neuware or a device is missing, its devices, memory (capacity, injected failures, memory
// ordered by streams, device memory the host cannot read), copies from pageable and page-locked host
// memory, failing kernels and a device that stops answering.
//
// CNRT reads its environment once per process, as the emulator does, so the cases that need another
// machine (less memory, no device, injected faults) are suites of their own that meson runs in their
// own processes with that environment (plugins/mlu/tests/meson.build); run elsewhere they skip.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "accelerator_runtime_checks.hpp"
#include "h2/h2.hpp"

namespace h2 {
namespace {

using testing::AllOf;
using testing::HasSubstr;

RuntimeOptions mlu_only() {
  return test::only_plugin("mlu");
}

const PluginInfo& mlu_info(const Runtime& runtime) {
  return runtime.plugins().at(0);
}

// Skips the test unless the process runs with `name` set to `value` (its meson test sets it).
#define REQUIRE_ENVIRONMENT(name, value)                                                        \
  do {                                                                                          \
    const char* set = std::getenv(name);                                                        \
    if (set == nullptr || std::string(set) != (value)) GTEST_SKIP() << "needs " name "=" value; \
  } while (false)

TEST(MluRuntime, ReportsTheEmulatedDevicesAndTheirMemory) {
  Runtime runtime(mlu_only());
  ASSERT_TRUE(mlu_info(runtime).loaded()) << mlu_info(runtime).message;
  ASSERT_EQ(runtime.devices().size(), 2u);
  const DeviceProperties& props = runtime.device("mlu", 1).properties();
  EXPECT_EQ(props.name, "MLU370-X8 (emulated)");
  EXPECT_EQ(props.vendor, "Cambricon");
  EXPECT_EQ(props.kind, DeviceKind::npu);
  EXPECT_EQ(props.total_memory_bytes, uint64_t{2} << 30);
  EXPECT_EQ(props.compute_units, 32u);  // 8 clusters of 4 cores
  EXPECT_FALSE(props.host_accessible);
}

TEST(MluRuntime, AnUnknownOptionIsRefusedByName) {
  RuntimeOptions options = mlu_only();
  options.plugin_options["mlu"] = {{"precision", "tf32"}};
  Runtime runtime(options);
  EXPECT_EQ(mlu_info(runtime).state, PluginState::init_failed);
  EXPECT_THAT(mlu_info(runtime).message, HasSubstr("precision"));
}

TEST(MluRuntime, CopiesFromPageableAndPinnedHostMemoryRoundTrip) {
  test::check_copies_round_trip("mlu");
}

TEST(MluRuntime, AnEventAfterACopyToPageableMemoryCompletesAfterTheBytesArrive) {
  test::check_event_after_pageable_copy("mlu");
}

TEST(MluRuntime, MemoryFreedInStreamOrderIsReusedInStreamOrder) {
  test::check_stream_ordered_reuse("mlu");
}

TEST(MluRuntime, EventsTimeTheWorkBetweenThem) {
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  Stream stream = device.create_stream();
  DeviceBuffer buffer = device.allocate(size_t{64} << 20);
  Event start = device.create_event(), end = device.create_event();
  start.record(stream);
  for (int i = 0; i < 4; ++i) stream.memset(buffer, static_cast<uint8_t>(i));
  end.record(stream);
  end.synchronize();
  EXPECT_GE(Event::elapsed_ms(start, end), 0.0f);
}

TEST(MluRuntime, ABadPointerIsAnInvalidArgumentNamingIt) {
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  const H2_PluginApi& api = device.plugin_api();
  Stream stream = device.create_stream();
  std::vector<uint8_t> host(16);
  EXPECT_EQ(api.memset_async(stream.handle(), host.data(), 0, host.size()), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("destination is not inside one live device allocation"));
  EXPECT_EQ(api.mem_free(0, host.data()), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("not a live allocation of device 0"));
}

// The operators run through CNNL with the stream's handle and workspaces from stream-ordered memory.
TEST(MluRuntime, OperatorsComputeThroughCnnl) {
  test::check_operators_compute("mlu");
}

// Filling integers converts as the ABI's copy does: toward zero, saturated, NaN to 0.
TEST(MluRuntime, FillingIntegersSaturates) {
  Runtime runtime(mlu_only());
  Stream stream = runtime.device("mlu", 0).create_stream();
  const Tensor t = Tensor::empty(stream, {2}, DType::i32);
  ops::fill(stream, t, 1e20);
  EXPECT_EQ(t.to_host(stream), (std::vector<double>(2, 2147483647.0)));
  ops::fill(stream, t, -2.7);
  EXPECT_EQ(t.to_host(stream), (std::vector<double>(2, -2.0)));
  ops::fill(stream, t, std::nan(""));
  EXPECT_EQ(t.to_host(stream), (std::vector<double>(2, 0.0)));
}

// A kernel that reads an index out of range fails the queue when it runs, naming the operator.
TEST(MluRuntime, AnIndexOutOfRangeFailsTheStreamNamingTheOperator) {
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  Stream stream = device.create_stream();
  const Tensor weight = Tensor::from_host(stream, std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f32);
  const Tensor indices = Tensor::from_host(stream, std::vector<double>{0, 5}, {2}, DType::i64);
  const Tensor y = Tensor::empty(stream, {2, 2}, DType::f32);
  ops::embedding(stream, weight, indices, y);
  try {
    stream.synchronize();
    FAIL() << "the out-of-range index was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_DEVICE_ERROR);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("cnnlEmbeddingForward_v2"), HasSubstr("index 5 is outside [0, 2)")));
  }
}

TEST(MluRuntimeDeathTest, HostCodeCannotReadDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        Runtime runtime(mlu_only());
        DeviceBuffer buffer = runtime.device("mlu", 0).allocate(4096);
        std::printf("%d\n", *static_cast<volatile const char*>(buffer.data()));
      },
      "");
}

// ---- Suites that need their own environment ----

TEST(MluWithoutNeuware, TheVendorRuntimeIsNamedMissingWithHowToInstallIt) {
  REQUIRE_ENVIRONMENT("NEUWARE_HOME", "/nonexistent/neuware");
  Runtime runtime(mlu_only());
  EXPECT_EQ(mlu_info(runtime).state, PluginState::runtime_missing);
  EXPECT_THAT(mlu_info(runtime).message,
              AllOf(HasSubstr("libcnrt.so was not found"), HasSubstr("/nonexistent/neuware/lib64 (NEUWARE_HOME)"),
                    HasSubstr("install Cambricon's Neuware")));
}

TEST(MluWithoutDevices, ADriverThatFindsNoDeviceIsNoDeviceNotAMissingRuntime) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_DEVICES", "0");
  Runtime runtime(mlu_only());
  EXPECT_EQ(mlu_info(runtime).state, PluginState::no_device);
  EXPECT_THAT(mlu_info(runtime).message, AllOf(HasSubstr("no MLU device"), HasSubstr("cnmon")));
}

TEST(MluMalformedEnvironment, TheVariableIsNamed) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_MEMORY", "lots");
  Runtime runtime(mlu_only());
  EXPECT_FALSE(mlu_info(runtime).loaded());
  EXPECT_THAT(mlu_info(runtime).message, HasSubstr("MLU_EMULATOR_MEMORY='lots' is not valid"));
}

TEST(MluVisibleDevices, FollowMluVisibleDevices) {
  REQUIRE_ENVIRONMENT("MLU_VISIBLE_DEVICES", "1");
  Runtime runtime(mlu_only());
  EXPECT_EQ(runtime.devices().size(), 1u);
}

TEST(MluSmallMemory, OutOfMemoryNamesTheDeviceTheRequestAndWhatIsFree) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_MEMORY", "64MiB");
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  DeviceBuffer kept = device.allocate(32 << 20);
  try {
    device.allocate(48 << 20);
    FAIL() << "an allocation beyond the device's memory succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("device 0 (MLU370-X8 (emulated)) cannot allocate 50331648 bytes"),
                                HasSubstr("of 67108864 bytes are free")));
  }
}

TEST(MluMallocFails, AnAllocationTheRuntimeRefusesIsOutOfMemory) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_FAIL", "malloc");
  Runtime runtime(mlu_only());
  try {
    runtime.device("mlu", 0).allocate(4096);
    FAIL() << "the injected allocation failure was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), HasSubstr("cnrtMalloc"));
  }
}

TEST(MluLostDevice, ADeviceThatStopsAnsweringFailsItsStreamWithTheRuntimesText) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_FAIL", "lost_after=3");
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  Stream stream = device.create_stream();
  DeviceBuffer buffer = device.allocate(4096);
  try {
    for (int i = 0; i < 5; ++i) stream.memset(buffer, static_cast<uint8_t>(i));
    stream.synchronize();
    FAIL() << "the lost device was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_DEVICE_ERROR);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("632006"), HasSubstr("stopped answering")));
  }
  EXPECT_THROW(stream.synchronize(), Error) << "a stream's error is sticky";
}

// An operator that fails on the device fails its stream, naming the CNNL operator; frees still work
// (they wait for the queues without taking over their errors).
TEST(MluKernelFault, AFailingOperatorFailsItsStreamNamingTheKernel) {
  REQUIRE_ENVIRONMENT("MLU_EMULATOR_FAIL", "kernel=cnnlOpTensor");
  Runtime runtime(mlu_only());
  Device device = runtime.device("mlu", 0);
  Stream stream = device.create_stream();
  const Tensor a = Tensor::from_host(stream, std::vector<double>{1, 2, 3}, {3}, DType::f32);
  const Tensor y = Tensor::empty(stream, {3}, DType::f32);
  ops::add(stream, a, a, y);
  try {
    stream.synchronize();
    FAIL() << "the failing kernel was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_DEVICE_ERROR);
    EXPECT_THAT(e.what(), AllOf(HasSubstr("100132"), HasSubstr("cnnlOpTensor")));
  }
  test::check_frees_after_a_stream_error(device, stream);
}

}  // namespace
}  // namespace h2
