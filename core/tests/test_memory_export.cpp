// Device memory shared between processes (ABI 1.3) through the core's API, on the plugin under test
// (cpu-reference, or the plugin meson test names in H2_TEST_PLUGIN: the Ascend plugin on its emulated
// CANN runtime, whose IPC keys map the exporter's device memory into the importer).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
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

// Device memory as a dma-buf (ABI 1.7) through the core: a range outside the buffer is refused by
// the core, and the plugin either exports (the device then claims H2_NIC_DIRECT_DMABUF) or says why
// not. The DmaBuf owns its descriptor.
TEST(MemoryExport, ADmaBufExportWorksWhereTheDeviceClaimsItElseSaysWhy) {
  Runtime runtime(test::plugin_under_test_only());
  Device device = runtime.device(test::plugin_under_test(), 0);
  DeviceBuffer buffer = device.allocate(8192);
  try {
    (void)device.export_dmabuf(buffer, 8000, 500);
    ADD_FAILURE() << "a range past the buffer was exported";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("cannot export bytes [8000, 8500) of a 8192-byte buffer"), std::string::npos)
        << e.what();
  }
  if (!device.can_export_dmabuf()) {
    EXPECT_FALSE(device.properties().nic_direct_dmabuf);
    return;
  }
  try {
    DmaBuf exported = device.export_dmabuf(buffer, 100, 4000);
    EXPECT_TRUE(device.properties().nic_direct_dmabuf);
    EXPECT_GE(exported.fd(), 0);
    EXPECT_EQ(exported.bytes(), 4000u);
    DmaBuf moved = std::move(exported);
    EXPECT_EQ(exported.fd(), -1);
    EXPECT_GE(moved.fd(), 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_UNSUPPORTED) << e.what();
    EXPECT_FALSE(device.properties().nic_direct_dmabuf) << "the device claims dma-bufs it cannot export: " << e.what();
  }
}

}  // namespace
}  // namespace h2
