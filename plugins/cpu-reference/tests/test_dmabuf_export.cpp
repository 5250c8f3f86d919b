// Device memory as a dma-buf (mem_export_dmabuf, ABI 1.7). The arguments are checked before the
// kernel is asked; then the export either works (where /dev/udmabuf is there: the dma-buf, mapped,
// holds the allocation's bytes at the offset given) or says why not, and the device's properties
// claim H2_NIC_DIRECT_DMABUF exactly when it works.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "h2/plugin_abi.h"
#include "quiet_init.hpp"

extern "C" const H2_PluginApi* h2_plugin_get_api(uint32_t abi_major);

namespace {

using testing::HasSubstr;

class DmaBufExport : public testing::Test {
 protected:
  void SetUp() override {
    api_ = h2_plugin_get_api(H2_ABI_MAJOR);
    const H2_InitArgs args = h2::cpu_reference::test::quiet_init_args();
    ASSERT_EQ(api_->initialize(&args), H2_STATUS_OK);
    ASSERT_NE(api_->mem_export_dmabuf, nullptr);
  }
  void TearDown() override { EXPECT_EQ(api_->shutdown(), H2_STATUS_OK); }

  const H2_PluginApi* api_ = nullptr;
};

TEST_F(DmaBufExport, ArgumentsAreCheckedBeforeTheKernelIsAsked) {
  void* data = nullptr;
  ASSERT_EQ(api_->mem_alloc(0, 1000, &data), H2_STATUS_OK);
  int32_t fd = -1;
  uint64_t offset = 0;
  float host = 0;
  EXPECT_EQ(api_->mem_export_dmabuf(0, &host, 4, &fd, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api_->last_error(), HasSubstr("not device memory of device 0"));
  EXPECT_EQ(api_->mem_export_dmabuf(0, static_cast<char*>(data) + 900, 200, &fd, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api_->last_error(), HasSubstr("runs 100 bytes past the end of its allocation"));
  EXPECT_EQ(api_->mem_export_dmabuf(0, data, 0, &fd, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api_->last_error(), HasSubstr("0 bytes"));
  EXPECT_EQ(api_->mem_export_dmabuf(0, data, 4, nullptr, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api_->last_error(), HasSubstr("fd is NULL"));
  EXPECT_EQ(api_->mem_export_dmabuf(7, data, 4, &fd, &offset), H2_STATUS_INVALID_ARGUMENT);
  ASSERT_EQ(api_->mem_free(0, data), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_export_dmabuf(0, data, 4, &fd, &offset), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api_->last_error(), HasSubstr("not inside a live allocation"));
  EXPECT_EQ(fd, -1);  // nothing was written on failure
}

TEST_F(DmaBufExport, ExportsTheAllocationsPagesOrSaysWhyNot) {
  constexpr size_t kBytes = 20000;
  void* data = nullptr;
  ASSERT_EQ(api_->mem_alloc(0, kBytes, &data), H2_STATUS_OK);
  std::vector<unsigned char> pattern(kBytes);
  for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<unsigned char>(i * 7 + 3);
  H2_Stream* stream = nullptr;
  ASSERT_EQ(api_->stream_create(0, &stream), H2_STATUS_OK);
  ASSERT_EQ(api_->memcpy_async(stream, data, pattern.data(), kBytes, H2_MEMCPY_HOST_TO_DEVICE), H2_STATUS_OK);
  ASSERT_EQ(api_->stream_synchronize(stream), H2_STATUS_OK);

  H2_DeviceProperties props{};
  props.struct_size = sizeof props;
  ASSERT_EQ(api_->device_properties(0, &props), H2_STATUS_OK);
  const bool claims = (props.nic_direct_memory & H2_NIC_DIRECT_DMABUF) != 0;

  constexpr size_t kFirst = 100, kLength = 9000;  // neither end on a page boundary
  int32_t fd = -1;
  uint64_t offset = 0;
  const H2_Status status = api_->mem_export_dmabuf(0, static_cast<char*>(data) + kFirst, kLength, &fd, &offset);
  if (access("/dev/udmabuf", R_OK | W_OK) != 0) {
    EXPECT_EQ(status, H2_STATUS_UNSUPPORTED);
    EXPECT_THAT(api_->last_error(), HasSubstr("/dev/udmabuf"));
    EXPECT_FALSE(claims);
  } else {
    ASSERT_EQ(status, H2_STATUS_OK) << api_->last_error();
    EXPECT_TRUE(claims);
    const off_t size = lseek(fd, 0, SEEK_END);
    ASSERT_GE(size, static_cast<off_t>(offset + kLength));
    EXPECT_EQ(size % sysconf(_SC_PAGESIZE), 0);
    void* mapped = mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    EXPECT_EQ(std::memcmp(static_cast<char*>(mapped) + offset, pattern.data() + kFirst, kLength), 0);
    munmap(mapped, static_cast<size_t>(size));
    close(fd);
  }
  EXPECT_EQ(api_->stream_destroy(stream), H2_STATUS_OK);
  EXPECT_EQ(api_->mem_free(0, data), H2_STATUS_OK);
}

}  // namespace
