// The emulated CANN runtime is strict where CANN is, so that plugin bugs show here and not first on
// hardware: asynchronous copies need page-locked host memory, an executor runs once, a workspace must
// be as large as asked, a descriptor must lie inside its allocation, and asking the Cube unit for
// HFLOAT32 really loses FP32 precision. These tests call the emulated libraries directly, as a
// plugin would.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ascend/aclnn.h"

extern "C" {
aclError aclInit(const char*);
aclError aclFinalize();
aclError aclrtSetDevice(int32_t);
aclError aclrtMalloc(void**, size_t, aclrtMemMallocPolicy);
aclError aclrtFree(void*);
aclError aclrtMallocHost(void**, size_t);
aclError aclrtFreeHost(void*);
aclError aclrtCreateStream(aclrtStream*);
aclError aclrtDestroyStream(aclrtStream);
aclError aclrtSynchronizeStream(aclrtStream);
aclError aclrtMemcpyAsync(void*, size_t, const void*, size_t, aclrtMemcpyKind, aclrtStream);
aclError aclrtMemsetAsync(void*, size_t, int32_t, size_t, aclrtStream);
const char* aclGetRecentErrMsg();
aclTensor* aclCreateTensor(const int64_t*, uint64_t, aclDataType, const int64_t*, int64_t, aclFormat, const int64_t*,
                           uint64_t, void*);
aclnnStatus aclDestroyTensor(const aclTensor*);
aclScalar* aclCreateScalar(void*, aclDataType);
aclnnStatus aclDestroyScalar(const aclScalar*);
aclnnStatus aclnnInplaceFillScalarGetWorkspaceSize(aclTensor*, const aclScalar*, uint64_t*, aclOpExecutor**);
aclnnStatus aclnnInplaceFillScalar(void*, uint64_t, aclOpExecutor*, aclrtStream);
aclnnStatus aclnnInplaceAddmmGetWorkspaceSize(const aclTensor*, const aclTensor*, const aclTensor*, const aclScalar*,
                                              const aclScalar*, int8_t, uint64_t*, aclOpExecutor**);
aclnnStatus aclnnInplaceAddmm(void*, uint64_t, aclOpExecutor*, aclrtStream);
}

namespace {

using testing::HasSubstr;

class Emulator : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(aclInit(nullptr), ACL_SUCCESS);
    ASSERT_EQ(aclrtSetDevice(0), ACL_SUCCESS);
    ASSERT_EQ(aclrtCreateStream(&stream_), ACL_SUCCESS);
  }
  void TearDown() override {
    aclrtSynchronizeStream(stream_);
    aclrtDestroyStream(stream_);
    aclFinalize();
  }

  // A contiguous FLOAT [rows, cols] tensor over device memory `data`.
  static aclTensor* matrix(void* data, int64_t rows, int64_t cols) {
    const int64_t dims[] = {rows, cols};
    const int64_t strides[] = {cols, 1};
    const int64_t storage = rows * cols;
    return aclCreateTensor(dims, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, &storage, 1, data);
  }

  aclrtStream stream_ = nullptr;
};

TEST_F(Emulator, AsynchronousCopiesNeedPageLockedHostMemory) {
  void* device = nullptr;
  ASSERT_EQ(aclrtMalloc(&device, 4096, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  void* pageable = std::aligned_alloc(64, 4096);  // aligned, so that only its kind is wrong
  EXPECT_EQ(aclrtMemcpyAsync(device, 4096, pageable, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream_),
            ACL_ERROR_INVALID_PARAM);
  EXPECT_THAT(aclGetRecentErrMsg(), HasSubstr("aclrtMallocHost"));
  std::free(pageable);
  void* pinned = nullptr;
  ASSERT_EQ(aclrtMallocHost(&pinned, 4096), ACL_SUCCESS);
  EXPECT_EQ(aclrtMemcpyAsync(device, 4096, pinned, 4096, ACL_MEMCPY_HOST_TO_DEVICE, stream_), ACL_SUCCESS);
  // CANN 8.0.0: "the source address and destination address must be 64-byte aligned".
  EXPECT_EQ(aclrtMemcpyAsync(static_cast<char*>(device) + 8, 64, pinned, 64, ACL_MEMCPY_HOST_TO_DEVICE, stream_),
            ACL_ERROR_RT_ADDR_UNALIGNED);
  aclrtSynchronizeStream(stream_);
  aclrtFreeHost(pinned);
  aclrtFree(device);
}

TEST_F(Emulator, AStreamWithPendingWorkCannotBeDestroyed) {
  void* device = nullptr;
  ASSERT_EQ(aclrtMalloc(&device, size_t{64} << 20, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  for (int i = 0; i < 16; ++i) aclrtMemsetAsync(device, size_t{64} << 20, i, size_t{64} << 20, stream_);
  EXPECT_EQ(aclrtDestroyStream(stream_), ACL_ERROR_RT_STREAM_NOT_COMPLETE);
  aclrtSynchronizeStream(stream_);
  aclrtFree(device);
}

TEST_F(Emulator, AnExecutorRunsOnceAndNeedsItsWholeWorkspace) {
  void* device = nullptr;
  ASSERT_EQ(aclrtMalloc(&device, 4 * 16, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  aclTensor* a = matrix(device, 2, 2);
  aclTensor* c = matrix(static_cast<char*>(device) + 32, 2, 2);
  double one = 1, zero = 0;
  aclScalar* alpha = aclCreateScalar(&one, ACL_DOUBLE);
  aclScalar* beta = aclCreateScalar(&zero, ACL_DOUBLE);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  ASSERT_EQ(aclnnInplaceAddmmGetWorkspaceSize(c, a, a, beta, alpha, KEEP_DTYPE, &workspace_size, &executor),
            ACLNN_SUCCESS);
  ASSERT_GT(workspace_size, 0u);
  void* workspace = nullptr;
  ASSERT_EQ(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  EXPECT_EQ(aclnnInplaceAddmm(workspace, workspace_size - 1, executor, stream_), ACLNN_ERR_PARAM_INVALID);
  EXPECT_THAT(aclGetRecentErrMsg(), HasSubstr("were asked for"));
  // The refused run consumed the executor too: a second run is refused as a reuse.
  EXPECT_EQ(aclnnInplaceAddmm(workspace, workspace_size, executor, stream_), ACLNN_ERR_PARAM_INVALID);
  EXPECT_THAT(aclGetRecentErrMsg(), HasSubstr("runs once"));
  aclDestroyScalar(alpha);
  aclDestroyScalar(beta);
  aclDestroyTensor(a);
  aclDestroyTensor(c);
  aclrtSynchronizeStream(stream_);
  aclrtFree(workspace);
  aclrtFree(device);
}

TEST_F(Emulator, ADescriptorMustLieInsideItsAllocation) {
  void* device = nullptr;
  ASSERT_EQ(aclrtMalloc(&device, 64, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
  // 64 bytes hold 16 floats; a [4, 8] view of a 32-element storage claims more than is there.
  aclTensor* too_big = matrix(device, 4, 8);
  double value = 1;
  aclScalar* scalar = aclCreateScalar(&value, ACL_DOUBLE);
  uint64_t workspace_size = 0;
  aclOpExecutor* executor = nullptr;
  EXPECT_EQ(aclnnInplaceFillScalarGetWorkspaceSize(too_big, scalar, &workspace_size, &executor),
            ACLNN_ERR_PARAM_INVALID);
  EXPECT_THAT(aclGetRecentErrMsg(), HasSubstr("not inside one live device allocation"));
  aclDestroyScalar(scalar);
  aclDestroyTensor(too_big);
  aclrtFree(device);
}

// 1 + 2^-12 is exact in FP32 but not in HFLOAT32 (10 mantissa bits): KEEP_DTYPE keeps it, USE_HF32
// and ALLOW_FP32_DOWN_PRECISION lose it, as the Cube unit does.
TEST_F(Emulator, HFloat32ReallyRoundsFp32Inputs) {
  const float x = 1.0f + 1.0f / 4096;
  for (int8_t cube : {int8_t{KEEP_DTYPE}, int8_t{USE_HF32}, int8_t{ALLOW_FP32_DOWN_PRECISION}}) {
    void* device = nullptr;
    ASSERT_EQ(aclrtMalloc(&device, 8, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    void* pinned = nullptr;
    ASSERT_EQ(aclrtMallocHost(&pinned, 8), ACL_SUCCESS);
    const float values[2] = {x, 0};
    std::memcpy(pinned, values, 8);
    aclrtMemcpyAsync(device, 8, pinned, 8, ACL_MEMCPY_HOST_TO_DEVICE, stream_);
    aclTensor* a = matrix(device, 1, 1);
    aclTensor* c = matrix(static_cast<char*>(device) + 4, 1, 1);
    double one = 1, zero = 0;
    aclScalar* alpha = aclCreateScalar(&one, ACL_DOUBLE);
    aclScalar* beta = aclCreateScalar(&zero, ACL_DOUBLE);
    uint64_t workspace_size = 0;
    aclOpExecutor* executor = nullptr;
    ASSERT_EQ(aclnnInplaceAddmmGetWorkspaceSize(c, a, a, beta, alpha, cube, &workspace_size, &executor), ACLNN_SUCCESS);
    void* workspace = nullptr;
    ASSERT_EQ(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST), ACL_SUCCESS);
    ASSERT_EQ(aclnnInplaceAddmm(workspace, workspace_size, executor, stream_), ACLNN_SUCCESS);
    aclrtMemcpyAsync(pinned, 8, device, 8, ACL_MEMCPY_DEVICE_TO_HOST, stream_);
    ASSERT_EQ(aclrtSynchronizeStream(stream_), ACL_SUCCESS);
    float product;
    std::memcpy(&product, static_cast<char*>(pinned) + 4, 4);
    if (cube == KEEP_DTYPE)
      EXPECT_EQ(product, x * x);
    else
      EXPECT_EQ(product, 1.0f) << "cubeMathType " << int{cube} << " kept FP32 precision";
    aclDestroyScalar(alpha);
    aclDestroyScalar(beta);
    aclDestroyTensor(a);
    aclDestroyTensor(c);
    aclrtFree(workspace);
    aclrtFreeHost(pinned);
    aclrtFree(device);
  }
}

}  // namespace
