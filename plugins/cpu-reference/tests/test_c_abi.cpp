// The cpu-reference plugin through its C table alone, as any host of the ABI would call it: invalid
// calls answer a status and a thread-local message, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>

#include "h2/plugin_abi.h"
#include "quiet_init.hpp"

extern "C" const H2_PluginApi* h2_plugin_get_api(uint32_t abi_major);

namespace {

using testing::HasSubstr;

class CAbi : public testing::Test {
 protected:
  void SetUp() override {
    api_ = h2_plugin_get_api(H2_ABI_MAJOR);
    ASSERT_NE(api_, nullptr);
    const H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
    ASSERT_EQ(api_->initialize(&args), H2_STATUS_OK) << api_->last_error();
  }
  void TearDown() override { EXPECT_EQ(api_->shutdown(), H2_STATUS_OK); }

  std::string error() const { return api_->last_error(); }

  const H2_PluginApi* api_ = nullptr;
};

TEST_F(CAbi, TableDeclaresItsVersionAndSize) {
  EXPECT_EQ(api_->struct_size, sizeof(H2_PluginApi));
  EXPECT_EQ(api_->abi_major, static_cast<uint32_t>(H2_ABI_MAJOR));
  EXPECT_EQ(api_->abi_minor, static_cast<uint32_t>(H2_ABI_MINOR));
  EXPECT_STREQ(api_->plugin_name, "cpu-reference");
  ASSERT_NE(api_->op_table, nullptr);
  EXPECT_EQ(api_->op_table->struct_size, sizeof(H2_OpTable));
}

TEST_F(CAbi, SecondInitializeIsRejected) {
  const H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
  EXPECT_EQ(api_->initialize(&args), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("already initialized"));
}

TEST_F(CAbi, PropertiesStructTooSmallIsRejected) {
  H2_DeviceProperties props{};
  props.struct_size = 16;
  EXPECT_EQ(api_->device_properties(0, &props), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("struct_size 16"));
}

TEST_F(CAbi, UnknownDeviceIsAnInvalidArgument) {
  void* p = nullptr;
  EXPECT_EQ(api_->mem_alloc(7, 64, &p), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("device 7 does not exist"));
  H2_Stream* stream = nullptr;
  EXPECT_EQ(api_->stream_create(-1, &stream), H2_STATUS_INVALID_ARGUMENT);
}

TEST_F(CAbi, DestroyedHandlesAreRejected) {
  H2_Stream* stream = nullptr;
  ASSERT_EQ(api_->stream_create(0, &stream), H2_STATUS_OK);
  ASSERT_EQ(api_->stream_destroy(stream), H2_STATUS_OK);
  EXPECT_EQ(api_->stream_synchronize(stream), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("not a live stream"));
  H2_Event* event = nullptr;
  ASSERT_EQ(api_->event_create(0, H2_EVENT_DEFAULT, &event), H2_STATUS_OK);
  ASSERT_EQ(api_->event_destroy(event), H2_STATUS_OK);
  EXPECT_EQ(api_->event_query(event), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("not a live event"));
}

TEST_F(CAbi, DoubleFreeIsRejected) {
  void* p = nullptr;
  ASSERT_EQ(api_->mem_alloc(0, 1024, &p), H2_STATUS_OK);
  ASSERT_EQ(api_->mem_free(0, p), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_free(0, p), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("not inside a live allocation"));
  void* host = nullptr;
  ASSERT_EQ(api_->host_alloc(100, &host), H2_STATUS_OK);
  ASSERT_EQ(api_->host_free(host), H2_STATUS_OK);
  EXPECT_EQ(api_->host_free(host), H2_STATUS_INVALID_ARGUMENT);
}

TEST_F(CAbi, CopiesOutsideAllocationsAreRejectedBeforeTheyRun) {
  void* p = nullptr;
  ASSERT_EQ(api_->mem_alloc(0, 100, &p), H2_STATUS_OK);
  H2_Stream* stream = nullptr;
  ASSERT_EQ(api_->stream_create(0, &stream), H2_STATUS_OK);
  char host[256] = {};
  EXPECT_EQ(api_->memcpy_async(stream, p, host, 101, H2_MEMCPY_HOST_TO_DEVICE), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("past the end of its allocation"));
  EXPECT_EQ(api_->memcpy_async(stream, host, p, 10, H2_MEMCPY_HOST_TO_DEVICE), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(api_->memcpy_async(stream, p, host, 10, static_cast<H2_MemcpyKind>(42)), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("unknown copy kind 42"));
  EXPECT_EQ(api_->memset_async(stream, host, 0, 1), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("not device memory"));
  // Rejected calls enqueued nothing and left the stream healthy.
  EXPECT_EQ(api_->stream_synchronize(stream), H2_STATUS_OK);
  EXPECT_EQ(api_->stream_destroy(stream), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_free(0, p), H2_STATUS_OK);
}

// H2_STREAM_HOST_INLINE: every call has run when it returns, a wait included, so no synchronize is
// needed before the host reads a copy's result.
TEST_F(CAbi, HostInlineStreamRunsEachCallBeforeItReturns) {
  ASSERT_NE(api_->stream_create_with_flags, nullptr);
  constexpr size_t kBig = size_t{64} << 20;
  void* big = nullptr;
  void* small = nullptr;
  ASSERT_EQ(api_->mem_alloc(0, kBig, &big), H2_STATUS_OK);
  ASSERT_EQ(api_->mem_alloc(0, 256, &small), H2_STATUS_OK);
  H2_Stream* queued = nullptr;
  H2_Stream* inline_stream = nullptr;
  ASSERT_EQ(api_->stream_create(0, &queued), H2_STATUS_OK);
  // An unknown bit beside the flag is ignored: flags are hints.
  ASSERT_EQ(api_->stream_create_with_flags(0, H2_STREAM_HOST_INLINE | (1u << 30), &inline_stream), H2_STATUS_OK);

  ASSERT_EQ(api_->memset_async(inline_stream, small, 7, 256), H2_STATUS_OK);
  unsigned char host[256] = {};
  ASSERT_EQ(api_->memcpy_async(inline_stream, host, small, 256, H2_MEMCPY_DEVICE_TO_HOST), H2_STATUS_OK);
  EXPECT_EQ(host[0], 7);
  EXPECT_EQ(host[255], 7);

  // A wait for work queued elsewhere returns once that work has completed.
  H2_Event* event = nullptr;
  ASSERT_EQ(api_->event_create(0, H2_EVENT_DISABLE_TIMING, &event), H2_STATUS_OK);
  ASSERT_EQ(api_->memset_async(queued, big, 1, kBig), H2_STATUS_OK);
  ASSERT_EQ(api_->event_record(event, queued), H2_STATUS_OK);
  ASSERT_EQ(api_->stream_wait_event(inline_stream, event), H2_STATUS_OK);
  EXPECT_EQ(api_->event_query(event), H2_STATUS_OK);
  EXPECT_EQ(api_->stream_query(inline_stream), H2_STATUS_OK);

  EXPECT_EQ(api_->stream_create_with_flags(7, H2_STREAM_HOST_INLINE, &inline_stream), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(api_->event_destroy(event), H2_STATUS_OK);
  EXPECT_EQ(api_->stream_destroy(inline_stream), H2_STATUS_OK);
  EXPECT_EQ(api_->stream_destroy(queued), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_free(0, small), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_free(0, big), H2_STATUS_OK);
}

TEST_F(CAbi, OperatorsCheckTheirTensorsAgainstTheAllocations) {
  H2_Stream* stream = nullptr;
  ASSERT_EQ(api_->stream_create(0, &stream), H2_STATUS_OK);
  float host[4] = {};
  H2_FillArgs args{};
  args.struct_size = sizeof args;
  args.y.data = host;  // host memory where device memory belongs
  args.y.dtype = H2_DTYPE_F32;
  args.y.rank = 1;
  args.y.shape[0] = 4;
  args.y.strides[0] = 1;
  EXPECT_EQ(api_->op_table->fill(stream, &args), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("fill: y"));
  EXPECT_THAT(error(), HasSubstr("is not device memory"));
  EXPECT_EQ(api_->op_table->fill(stream, nullptr), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("fill: args is NULL"));
  EXPECT_EQ(api_->stream_destroy(stream), H2_STATUS_OK);
}

TEST_F(CAbi, CapabilityOfEveryOperator) {
  for (uint32_t op = 1; op <= H2_OP_COUNT_1_1; ++op) {
    H2_OpCapability capability{};
    capability.struct_size = sizeof capability;
    ASSERT_EQ(api_->op_table->capability(0, op, &capability), H2_STATUS_OK) << op;
    EXPECT_TRUE(capability.dtypes & (1u << H2_DTYPE_BF16)) << op;
    EXPECT_EQ(capability.deterministic, 1u) << op;
  }
  H2_OpCapability capability{};
  capability.struct_size = sizeof capability;
  EXPECT_EQ(api_->op_table->capability(0, H2_OP_COUNT_1_1 + 1, &capability), H2_STATUS_UNSUPPORTED);
}

TEST_F(CAbi, LastErrorBelongsToTheCallingThread) {
  void* p = nullptr;
  EXPECT_EQ(api_->mem_alloc(9, 64, &p), H2_STATUS_INVALID_ARGUMENT);
  std::string other;
  std::thread([&] { other = api_->last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_THAT(error(), HasSubstr("device 9"));
}

TEST_F(CAbi, NullOutputPointersAreRejected) {
  EXPECT_EQ(api_->device_count(nullptr), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(error(), HasSubstr("count is NULL"));
  EXPECT_EQ(api_->mem_alloc(0, 64, nullptr), H2_STATUS_INVALID_ARGUMENT);
}

// Options (ABI 1.4) as any host passes them: an array of H2_Option, stepped by its struct_size.
class CAbiOptions : public testing::Test {
 protected:
  void TearDown() override {
    if (initialized_) {
      EXPECT_EQ(api_->shutdown(), H2_STATUS_OK);
    }
  }
  H2_Status initialize(const H2_Option* options, size_t count) {
    H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
    args.options = options;
    args.option_count = count;
    const H2_Status status = api_->initialize(&args);
    initialized_ = status == H2_STATUS_OK;
    return status;
  }
  int32_t device_count() {
    int32_t count = 0;
    EXPECT_EQ(api_->device_count(&count), H2_STATUS_OK);
    return count;
  }

  const H2_PluginApi* api_ = h2_plugin_get_api(H2_ABI_MAJOR);
  bool initialized_ = false;
};

TEST_F(CAbiOptions, OptionListIsCallableBeforeInitialize) {
  const H2_OptionInfo* infos = nullptr;
  size_t count = 0;
  ASSERT_EQ(api_->option_list(&infos, &count), H2_STATUS_OK);
  ASSERT_EQ(count, 7u);
  EXPECT_GE(infos->struct_size, H2_OPTION_INFO_SIZE_1_4);
  EXPECT_STREQ(H2_ARRAY_AT(H2_OptionInfo, infos, 1)->key, "memory");
  EXPECT_STREQ(H2_ARRAY_AT(H2_OptionInfo, infos, 1)->default_value, "4GiB");
  EXPECT_EQ(api_->option_list(nullptr, &count), H2_STATUS_INVALID_ARGUMENT);
}

TEST_F(CAbiOptions, AnOptionReachesTheConfiguration) {
  const H2_Option options[] = {{sizeof(H2_Option), "devices", "3"}, {sizeof(H2_Option), "memory", "16MiB"}};
  ASSERT_EQ(initialize(options, 2), H2_STATUS_OK) << api_->last_error();
  EXPECT_EQ(device_count(), 3);
}

TEST_F(CAbiOptions, AnUnknownKeyIsRefusedNamingTheKnownOnes) {
  const H2_Option options[] = {{sizeof(H2_Option), "devcies", "3"}};
  EXPECT_EQ(initialize(options, 1), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(api_->last_error()),
              HasSubstr("unknown option 'devcies' for plugin cpu-reference: its keys are devices, memory, strict, "
                        "blocking, op_dtypes, threads, collectives_in_place"));
}

TEST_F(CAbiOptions, MalformedOptionArraysAreRefused) {
  const H2_Option twice[] = {{sizeof(H2_Option), "devices", "3"}, {sizeof(H2_Option), "devices", "2"}};
  EXPECT_EQ(initialize(twice, 2), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(api_->last_error()), HasSubstr("option 'devices' is given twice"));
  const H2_Option no_value[] = {{sizeof(H2_Option), "devices", nullptr}};
  EXPECT_EQ(initialize(no_value, 1), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(initialize(nullptr, 1), H2_STATUS_INVALID_ARGUMENT);
  const H2_Option too_small[] = {{8, "devices", "3"}};
  EXPECT_EQ(initialize(too_small, 1), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(std::string(api_->last_error()), HasSubstr("H2_Option struct_size 8"));
}

// A host of ABI 1.0-1.3 passes the smaller H2_InitArgs: whatever lies beyond it is not read.
TEST_F(CAbiOptions, ArgumentsOfAnOlderCoreCarryNoOptions) {
  H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
  args.struct_size = H2_INIT_ARGS_SIZE_1_0;
  args.option_count = 5;  // garbage from the core's point of view
  ASSERT_EQ(api_->initialize(&args), H2_STATUS_OK) << api_->last_error();
  initialized_ = true;
  EXPECT_EQ(device_count(), 1);
}

}  // namespace
