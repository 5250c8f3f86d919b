// The CUDA plugin's collective section where no GPU is: NCCL is found and named as the plugin
// loads, and every call refuses what it must before touching a device. The collectives themselves
// run on a GPU (scripts/gpu/run-gpu-checks.sh).
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "h2/plugin_abi.h"

namespace {

using testing::HasSubstr;
using testing::StartsWith;

const H2_PluginApi& cuda_plugin() {
  static const H2_PluginApi* api = [] {
    void* handle = dlopen(H2_CUDA_PLUGIN_FILE, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return static_cast<const H2_PluginApi*>(nullptr);
    auto get = reinterpret_cast<const H2_PluginApi* (*)(uint32_t)>(dlsym(handle, "h2_plugin_get_api"));
    return get != nullptr ? get(H2_ABI_MAJOR) : nullptr;
  }();
  if (api == nullptr) throw std::runtime_error(std::string("cannot load ") + H2_CUDA_PLUGIN_FILE);
  return *api;
}

// Whether libnccl.so.2 loads here as the plugin looks for it (the loader's path among the places).
bool nccl_loads() {
  void* handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) handle = dlopen("/usr/local/cuda/lib64/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  return handle != nullptr;
}

TEST(CudaCollectives, NcclIsOfferedWhereItLoadsAndNamedByItsVersion) {
  const H2_PluginApi& api = cuda_plugin();
  if (!nccl_loads()) {
    EXPECT_EQ(api.collective_table, nullptr) << "no NCCL here, yet the plugin offers a collective library";
    GTEST_SKIP() << "libnccl.so.2 is not installed here";
  }
  ASSERT_NE(api.collective_table, nullptr);
  const H2_CollectiveTable& table = *api.collective_table;
  EXPECT_THAT(table.library_name, StartsWith("NCCL 2."));
  EXPECT_EQ(table.scope, H2_COMM_SCOPE_NETWORK);
  EXPECT_GE(table.struct_size, H2_COLLECTIVE_TABLE_SIZE_1_5);
  // A unique id needs no device: NCCL's bootstrap opens a socket.
  H2_CommUniqueId id{};
  ASSERT_EQ(table.get_unique_id(&id), H2_STATUS_OK) << api.last_error();
  bool written = false;
  for (uint8_t byte : id.bytes) written = written || byte != 0;
  EXPECT_TRUE(written);
}

TEST(CudaCollectives, CallsRefuseBadArgumentsBeforeAnyDeviceWork) {
  const H2_PluginApi& api = cuda_plugin();
  if (api.collective_table == nullptr) GTEST_SKIP() << "no NCCL here";
  const H2_CollectiveTable& table = *api.collective_table;
  EXPECT_EQ(table.get_unique_id(nullptr), H2_STATUS_INVALID_ARGUMENT);
  H2_CommUniqueId id{};
  H2_Comm* comm = nullptr;
  EXPECT_EQ(table.comm_init_rank(0, &id, 2, 2, 1000, &comm), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("rank 2 of a communicator of 2 ranks"));
  // Not initialized here (no driver): refused by name, nothing joined.
  EXPECT_NE(table.comm_init_rank(0, &id, 2, 0, 1000, &comm), H2_STATUS_OK);
  EXPECT_THAT(api.last_error(), HasSubstr("not initialized"));
  EXPECT_EQ(table.group_end(), H2_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(api.last_error(), HasSubstr("group_end without group_start"));
  EXPECT_NE(table.allreduce(reinterpret_cast<H2_Comm*>(&id), nullptr, nullptr, 4, H2_DTYPE_I32, H2_REDUCE_MEAN,
                            nullptr),
            H2_STATUS_OK);
  EXPECT_THAT(api.last_error(), HasSubstr("no MEAN of integers"));
}

}  // namespace
