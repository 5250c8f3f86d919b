// Device memory shared between two processes through mem_export / mem_import (ABI 1.3): the
// importer reads what the exporter wrote and the exporter sees what the importer wrote, with copies
// and an operator, in the default arena and in strict mode. Each test forks before either process
// initializes the plugin (plugin threads do not survive fork).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"
#include "quiet_init.hpp"

extern "C" const H2_PluginApi* h2_plugin_get_api(uint32_t abi_major);

namespace {

using testing::HasSubstr;

const H2_PluginApi& initialized_api() {
  const H2_PluginApi* api = h2_plugin_get_api(H2_ABI_MAJOR);
  const H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
  if (api->initialize(&args) != H2_STATUS_OK) std::abort();
  return *api;
}

struct Message {
  H2_MemHandle handle;
  uint64_t offset;
};

// The importing process: checks the exporter's floats, adds 1 to each with the binary operator into
// the exporter's memory, and exits 0 when all went well (otherwise the number of the failed step).
[[noreturn]] void importer(int from_exporter, int to_exporter, int count) {
  const H2_PluginApi& api = initialized_api();
  Message message{};
  if (read(from_exporter, &message, sizeof message) != static_cast<ssize_t>(sizeof message)) _exit(10);
  void* base = nullptr;
  uint64_t bytes = 0;
  if (api.mem_import(0, &message.handle, &base, &bytes) != H2_STATUS_OK) _exit(11);
  // The handle names the whole arena (a region the ABI lets a plugin choose), the floats lie inside.
  const size_t data_bytes = count * sizeof(float);
  if (message.offset == 0 || message.offset + data_bytes > bytes) _exit(12);
  void* data = static_cast<char*>(base) + message.offset;
  H2_Stream* stream = nullptr;
  if (api.stream_create(0, &stream) != H2_STATUS_OK) _exit(13);
  std::vector<float> seen(static_cast<size_t>(count));
  if (api.memcpy_async(stream, seen.data(), data, data_bytes, H2_MEMCPY_DEVICE_TO_HOST) != H2_STATUS_OK) _exit(14);
  if (api.stream_synchronize(stream) != H2_STATUS_OK) _exit(15);
  for (int i = 0; i < count; ++i)
    if (seen[static_cast<size_t>(i)] != static_cast<float>(i)) _exit(16);
  // Past the end of the region is refused, not read.
  float past = 0;
  if (api.memcpy_async(stream, &past, static_cast<char*>(base) + bytes - 2, 4, H2_MEMCPY_DEVICE_TO_HOST) !=
      H2_STATUS_INVALID_ARGUMENT)
    _exit(17);
  // y = x + 1 in place, on the imported memory.
  H2_BinaryScalarArgs add{};
  add.struct_size = sizeof add;
  add.op = H2_BINARY_ADD;
  for (H2_Tensor* t : {&add.x, &add.y}) {
    t->data = data;
    t->dtype = H2_DTYPE_F32;
    t->rank = 1;
    t->shape[0] = count;
    t->strides[0] = 1;
  }
  add.scalar = 1.0;
  if (api.op_table->binary_scalar(stream, &add) != H2_STATUS_OK) _exit(18);
  if (api.stream_synchronize(stream) != H2_STATUS_OK) _exit(19);
  if (api.mem_free(0, base) != H2_STATUS_INVALID_ARGUMENT) _exit(20);  // closed, not freed
  if (api.mem_close(0, base) != H2_STATUS_OK) _exit(21);
  if (api.mem_close(0, base) != H2_STATUS_INVALID_ARGUMENT) _exit(22);
  if (api.stream_destroy(stream) != H2_STATUS_OK) _exit(23);
  const char done = 1;
  if (write(to_exporter, &done, 1) != 1) _exit(24);
  api.shutdown();
  _exit(0);
}

void exchange_through_shared_memory(bool strict) {
  if (strict) setenv("H2_CPU_REFERENCE_STRICT", "1", 1);
  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  constexpr int kCount = 3000;  // not a whole number of pages
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) importer(down[0], up[1], kCount);

  const H2_PluginApi& api = initialized_api();
  void* padding = nullptr;  // so the shared allocation does not start at the arena's first byte
  void* data = nullptr;
  ASSERT_EQ(api.mem_alloc(0, 1000, &padding), H2_STATUS_OK);
  ASSERT_EQ(api.mem_alloc(0, kCount * sizeof(float), &data), H2_STATUS_OK);
  std::vector<float> values(kCount);
  for (int i = 0; i < kCount; ++i) values[static_cast<size_t>(i)] = static_cast<float>(i);
  H2_Stream* stream = nullptr;
  ASSERT_EQ(api.stream_create(0, &stream), H2_STATUS_OK);
  ASSERT_EQ(api.memcpy_async(stream, data, values.data(), sizeof(float) * kCount, H2_MEMCPY_HOST_TO_DEVICE),
            H2_STATUS_OK);
  ASSERT_EQ(api.stream_synchronize(stream), H2_STATUS_OK);

  Message message{};
  uint64_t inner = 0;
  ASSERT_EQ(api.mem_export(0, data, &message.handle, &message.offset), H2_STATUS_OK);
  H2_MemHandle same{};
  ASSERT_EQ(api.mem_export(0, static_cast<char*>(data) + 40, &same, &inner), H2_STATUS_OK);
  EXPECT_EQ(inner, message.offset + 40);  // offsets are within one region
  ASSERT_EQ(api.mem_export(0, padding, &same, &inner), H2_STATUS_OK);
  EXPECT_EQ(std::memcmp(same.bytes, message.handle.bytes, sizeof same.bytes), 0)
      << "cpu-reference exports the whole arena, so two allocations share a handle";
  ASSERT_EQ(write(down[1], &message, sizeof message), static_cast<ssize_t>(sizeof message));
  char done = 0;
  ASSERT_EQ(read(up[0], &done, 1), 1) << "the importer ended early";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the importer failed at step " << WEXITSTATUS(status);

  std::vector<float> after(kCount);
  ASSERT_EQ(api.memcpy_async(stream, after.data(), data, sizeof(float) * kCount, H2_MEMCPY_DEVICE_TO_HOST),
            H2_STATUS_OK);
  ASSERT_EQ(api.stream_synchronize(stream), H2_STATUS_OK);
  for (int i = 0; i < kCount; ++i) ASSERT_EQ(after[static_cast<size_t>(i)], static_cast<float>(i + 1)) << i;

  EXPECT_EQ(api.stream_destroy(stream), H2_STATUS_OK);
  EXPECT_EQ(api.mem_free(0, data), H2_STATUS_OK);
  EXPECT_EQ(api.mem_free(0, padding), H2_STATUS_OK);
  EXPECT_EQ(api.shutdown(), H2_STATUS_OK);
  for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
  unsetenv("H2_CPU_REFERENCE_STRICT");
}

TEST(MemorySharing, TwoProcessesReadAndWriteOneAllocation) {
  exchange_through_shared_memory(false);
}

TEST(MemorySharing, StrictModeToo) {
  exchange_through_shared_memory(true);
}

TEST(MemorySharing, BadHandlesAndPointersAreRefused) {
  const H2_PluginApi& api = initialized_api();
  H2_MemHandle handle{};
  void* ptr = nullptr;
  uint64_t bytes = 0;
  EXPECT_EQ(api.mem_import(0, &handle, &ptr, &bytes), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("not made by cpu-reference's mem_export"));

  // A handle naming a process that has ended.
  void* data = nullptr;
  ASSERT_EQ(api.mem_alloc(0, 256, &data), H2_STATUS_OK);
  uint64_t offset = 0;
  ASSERT_EQ(api.mem_export(0, data, &handle, &offset), H2_STATUS_OK);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  std::memcpy(handle.bytes + 12, &gone, sizeof gone);  // the pid field of the handle
  EXPECT_EQ(api.mem_import(0, &handle, &ptr, &bytes), H2_STATUS_UNSUPPORTED);
  EXPECT_THAT(api.last_error(), HasSubstr("cannot open memory of process " + std::to_string(gone)));

  float host = 0;
  EXPECT_EQ(api.mem_export(0, &host, &handle, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("not device memory"));
  EXPECT_EQ(api.mem_close(0, data), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("not an open import"));
  EXPECT_EQ(api.mem_free(0, data), H2_STATUS_OK);
  EXPECT_EQ(api.mem_export(0, data, &handle, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(api.shutdown(), H2_STATUS_OK);
}

}  // namespace
