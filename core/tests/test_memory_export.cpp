// Device memory shared between processes (ABI 1.3) through the core's API, on the plugin under test
// (cpu-reference, or the plugin meson test names in H2_TEST_PLUGIN: the Ascend plugin on its emulated
// CANN runtime, whose IPC keys map the exporter's device memory into the importer).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

// Memory shared between processes through the core's API: the importing process reads the
// exporter's bytes and writes its own, and the imported buffer closes itself. The fork comes before
// either process loads the plugin (plugin threads do not survive fork).
TEST(MemoryExport, AnotherProcessReadsAndWritesAnExportedBuffer) {
  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int code = 0;
    try {
      Runtime runtime(test::plugin_under_test_only());
      Device device = runtime.device(test::plugin_under_test(), 0);
      MemoryExport where;
      if (read(down[0], &where, sizeof where) != static_cast<ssize_t>(sizeof where)) _exit(10);
      DeviceBuffer imported = device.import_memory(where.handle);
      // The handle names a region holding the buffer (cpu-reference: its whole arena; Ascend: the
      // allocation); the exporter exported the buffer's byte 100.
      if (where.offset < 100 || where.offset - 100 + 4096 > imported.size()) _exit(14);
      const size_t start = where.offset - 100;
      Stream stream = device.create_stream();
      std::vector<uint8_t> seen(4096);
      stream.copy_to_host(seen.data(), imported, seen.size(), start);
      stream.synchronize();
      code = seen[0] == 5 && seen[4095] == 5 ? 0 : 11;
      stream.memset(imported, 9, start, 16);
      stream.synchronize();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "importer: %s\n", e.what());
      code = 12;
    }
    const char done = 1;
    if (write(up[1], &done, 1) != 1) code = 13;
    _exit(code);
  }
  Runtime runtime(test::plugin_under_test_only());
  Device device = runtime.device(test::plugin_under_test(), 0);
  ASSERT_TRUE(device.can_share_memory());
  DeviceBuffer buffer = device.allocate(4096);
  Stream stream = device.create_stream();
  stream.memset(buffer, 5);
  stream.synchronize();
  const MemoryExport where = device.export_memory(buffer, 100);
  EXPECT_EQ(device.export_memory(buffer, 0).offset, where.offset - 100);
  ASSERT_EQ(write(down[1], &where, sizeof where), static_cast<ssize_t>(sizeof where));
  char done = 0;
  ASSERT_EQ(read(up[0], &done, 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  uint8_t head[17] = {};
  stream.copy_to_host(head, buffer, sizeof head);
  stream.synchronize();
  EXPECT_EQ(head[0], 9);
  EXPECT_EQ(head[15], 9);
  EXPECT_EQ(head[16], 5);
  for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
}

}  // namespace
}  // namespace h2
