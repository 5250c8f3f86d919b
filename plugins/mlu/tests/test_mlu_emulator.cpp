// The emulated Neuware runtime is strict where the real one is, so that the MLU plugin's tests catch
// what would fail on an MLU: host code cannot read device memory, queues run asynchronously to the
// host, a CNNL handle works only with a queue of the calling thread's device, descriptors must fit
// their memory, and HALF data accumulates in FP32.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mlu/cnnl.h"
#include "mlu/cnrt.h"

extern "C" {
// The emulator's libraries export exactly the declared functions.
cnrtRet_t cnrtSetDevice(int);
cnrtRet_t cnrtMalloc(void**, size_t);
cnrtRet_t cnrtFree(void*);
cnrtRet_t cnrtHostMalloc(void**, size_t);
cnrtRet_t cnrtFreeHost(void*);
cnrtRet_t cnrtQueueCreate(cnrtQueue_t*);
cnrtRet_t cnrtQueueDestroy(cnrtQueue_t);
cnrtRet_t cnrtQueueSync(cnrtQueue_t);
cnrtRet_t cnrtQueueQuery(cnrtQueue_t);
cnrtRet_t cnrtMemcpyAsync_V2(void*, void*, size_t, cnrtQueue_t, cnrtMemTransDir_t);
cnrtRet_t cnrtMemsetAsync(void*, int, size_t, cnrtQueue_t);
cnrtRet_t cnrtInvokeHostFunc(cnrtQueue_t, cnrtHostFn_t, void*);
cnrtRet_t cnrtNotifierCreate(cnrtNotifier_t*);
cnrtRet_t cnrtNotifierDestroy(cnrtNotifier_t);
cnrtRet_t cnrtPlaceNotifier(cnrtNotifier_t, cnrtQueue_t);
cnrtRet_t cnrtQueueWaitNotifier(cnrtNotifier_t, cnrtQueue_t, unsigned int);
cnrtRet_t cnrtAcquireMemHandle(cnrtIpcMemHandle*, void*);
cnrtRet_t cnrtMapMemHandle(void**, cnrtIpcMemHandle, int);
const char* cnrtGetErrorStr(cnrtRet_t);
cnnlStatus_t cnnlCreate(cnnlHandle_t*);
cnnlStatus_t cnnlDestroy(cnnlHandle_t);
cnnlStatus_t cnnlSetQueue(cnnlHandle_t, cnrtQueue_t);
const char* cnnlGetErrorString(cnnlStatus_t);
cnnlStatus_t cnnlCreateTensorDescriptor(cnnlTensorDescriptor_t*);
cnnlStatus_t cnnlDestroyTensorDescriptor(cnnlTensorDescriptor_t);
cnnlStatus_t cnnlSetTensorDescriptorEx_v2(cnnlTensorDescriptor_t, cnnlTensorLayout_t, cnnlDataType_t, int,
                                          const int64_t[], const int64_t[]);
cnnlStatus_t cnnlFill_v3(cnnlHandle_t, cnnlPointerMode_t, const void*, const cnnlTensorDescriptor_t, void*);
cnnlStatus_t cnnlMatMulDescCreate(cnnlMatMulDescriptor_t*);
cnnlStatus_t cnnlMatMulDescDestroy(cnnlMatMulDescriptor_t);
cnnlStatus_t cnnlMatMulAlgoCreate(cnnlMatMulAlgo_t*);
cnnlStatus_t cnnlMatMulAlgoDestroy(cnnlMatMulAlgo_t);
cnnlStatus_t cnnlCreateMatMulHeuristicResult(cnnlMatMulHeuristicResult_t*);
cnnlStatus_t cnnlDestroyMatMulHeuristicResult(cnnlMatMulHeuristicResult_t);
cnnlStatus_t cnnlGetMatMulAlgoHeuristic(cnnlHandle_t, cnnlMatMulDescriptor_t, cnnlTensorDescriptor_t,
                                        cnnlTensorDescriptor_t, cnnlTensorDescriptor_t, cnnlTensorDescriptor_t,
                                        cnnlMatMulPrefer_t, int, cnnlMatMulHeuristicResult_t[], int*);
cnnlStatus_t cnnlGetMatMulHeuristicResult(cnnlMatMulHeuristicResult_t, cnnlMatMulAlgo_t, size_t*);
cnnlStatus_t cnnlMatMul_v2(cnnlHandle_t, const cnnlMatMulDescriptor_t, const cnnlMatMulAlgo_t, const void*,
                           const cnnlTensorDescriptor_t, const void*, const cnnlTensorDescriptor_t, const void*,
                           const void*, const cnnlTensorDescriptor_t, void*, void*, size_t,
                           const cnnlTensorDescriptor_t, void*);
}

namespace {

using testing::HasSubstr;

// A descriptor of a contiguous tensor.
struct Desc {
  Desc(cnnlDataType_t dtype, std::vector<int64_t> dims) {
    std::vector<int64_t> strides(dims.size(), 1);
    for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * dims[d];
    EXPECT_EQ(cnnlCreateTensorDescriptor(&desc), CNNL_STATUS_SUCCESS);
    EXPECT_EQ(cnnlSetTensorDescriptorEx_v2(desc, CNNL_LAYOUT_ARRAY, dtype, static_cast<int>(dims.size()), dims.data(),
                                           strides.data()),
              CNNL_STATUS_SUCCESS);
  }
  ~Desc() { cnnlDestroyTensorDescriptor(desc); }
  cnnlTensorDescriptor_t desc = nullptr;
};

class MluEmulator : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cnrtSetDevice(0), cnrtSuccess);
    ASSERT_EQ(cnrtQueueCreate(&queue_), cnrtSuccess);
    ASSERT_EQ(cnnlCreate(&handle_), CNNL_STATUS_SUCCESS);
    ASSERT_EQ(cnnlSetQueue(handle_, queue_), CNNL_STATUS_SUCCESS);
  }
  void TearDown() override {
    cnrtSetDevice(0);
    cnnlDestroy(handle_);
    cnrtQueueDestroy(queue_);
  }
  cnrtQueue_t queue_ = nullptr;
  cnnlHandle_t handle_ = nullptr;
};

TEST_F(MluEmulator, QueuesRunAsynchronouslyToTheHost) {
  std::atomic<bool> release{false};
  auto wait = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  ASSERT_EQ(cnrtInvokeHostFunc(queue_, wait, &release), cnrtSuccess);
  EXPECT_EQ(cnrtQueueQuery(queue_), cnrtErrorNotReady) << "the queue ran its work before the call returned";
  release = true;
  EXPECT_EQ(cnrtQueueSync(queue_), cnrtSuccess);
  EXPECT_EQ(cnrtQueueQuery(queue_), cnrtSuccess);
}

// A queue that waits for a notifier runs its later work only after the other queue reached it.
TEST_F(MluEmulator, AQueueWaitsForANotifierPlacedOnAnother) {
  cnrtQueue_t other = nullptr;
  ASSERT_EQ(cnrtQueueCreate(&other), cnrtSuccess);
  void* device = nullptr;
  void* host = nullptr;
  ASSERT_EQ(cnrtMalloc(&device, 64), cnrtSuccess);
  ASSERT_EQ(cnrtHostMalloc(&host, 64), cnrtSuccess);
  std::atomic<bool> release{false};
  auto wait = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  cnrtNotifier_t reached = nullptr;
  ASSERT_EQ(cnrtNotifierCreate(&reached), cnrtSuccess);
  ASSERT_EQ(cnrtInvokeHostFunc(queue_, wait, &release), cnrtSuccess);
  ASSERT_EQ(cnrtMemsetAsync(device, 1, 64, queue_), cnrtSuccess);
  ASSERT_EQ(cnrtPlaceNotifier(reached, queue_), cnrtSuccess);
  ASSERT_EQ(cnrtQueueWaitNotifier(reached, other, 0), cnrtSuccess);
  ASSERT_EQ(cnrtMemcpyAsync_V2(host, device, 64, other, cnrtMemcpyDevToHost), cnrtSuccess);
  release = true;
  ASSERT_EQ(cnrtQueueSync(other), cnrtSuccess);
  EXPECT_EQ(static_cast<const uint8_t*>(host)[63], 1) << "the waiting queue copied before the notifier";
  cnrtNotifierDestroy(reached);
  cnrtFreeHost(host);
  cnrtFree(device);
  cnrtQueueDestroy(other);
}

TEST_F(MluEmulator, AnAsynchronousCopyTakesPageLockedHostMemoryOnly) {
  void* device = nullptr;
  ASSERT_EQ(cnrtMalloc(&device, 64), cnrtSuccess);
  std::vector<uint8_t> pageable(64);
  const cnrtRet_t code = cnrtMemcpyAsync_V2(device, pageable.data(), 64, queue_, cnrtMemcpyHostToDev);
  EXPECT_EQ(code, cnrtErrorArgsInvalid);
  EXPECT_THAT(cnrtGetErrorStr(code), HasSubstr("not page-locked memory from cnrtHostMalloc"));
  cnrtFree(device);
}

TEST_F(MluEmulator, OnlyTheStartOfAnAllocationIsFreedOrShared) {
  void* device = nullptr;
  ASSERT_EQ(cnrtMalloc(&device, 4096), cnrtSuccess);
  void* inside = static_cast<char*>(device) + 128;
  EXPECT_EQ(cnrtFree(inside), cnrtErrorArgsInvalid);
  cnrtIpcMemHandle handle = nullptr;
  EXPECT_EQ(cnrtAcquireMemHandle(&handle, inside), cnrtErrorArgsInvalid);
  ASSERT_EQ(cnrtAcquireMemHandle(&handle, device), cnrtSuccess);
  void* mapped = nullptr;
  EXPECT_EQ(cnrtMapMemHandle(&mapped, handle, 0), cnrtErrorArgsInvalid) << "a process mapped its own memory";
  EXPECT_EQ(cnrtFree(device), cnrtSuccess);
  EXPECT_EQ(cnrtFree(device), cnrtErrorArgsInvalid) << "a double free went unnoticed";
}

TEST_F(MluEmulator, AHandleWorksOnlyFromItsQueuesDevice) {
  void* device = nullptr;
  ASSERT_EQ(cnrtMalloc(&device, 64), cnrtSuccess);
  Desc ones(CNNL_DTYPE_FLOAT, {16});
  const float one = 1.0f;
  ASSERT_EQ(cnrtSetDevice(1), cnrtSuccess);
  const cnnlStatus_t status = cnnlFill_v3(handle_, CNNL_POINTER_MODE_HOST, &one, ones.desc, device);
  EXPECT_EQ(status, CNNL_STATUS_EXECUTION_FAILED);
  EXPECT_THAT(cnnlGetErrorString(status), HasSubstr("the calling thread's current device is 1"));
  cnrtQueue_t queue_of_device_1 = nullptr;
  ASSERT_EQ(cnrtQueueCreate(&queue_of_device_1), cnrtSuccess);
  EXPECT_EQ(cnnlSetQueue(handle_, queue_of_device_1), CNNL_STATUS_BAD_PARAM) << "a handle took another device's queue";
  cnrtQueueDestroy(queue_of_device_1);
  ASSERT_EQ(cnrtSetDevice(0), cnrtSuccess);
  cnrtFree(device);
}

TEST_F(MluEmulator, ADescriptorMustFitItsMemory) {
  void* device = nullptr;
  ASSERT_EQ(cnrtMalloc(&device, 64), cnrtSuccess);  // 16 floats
  Desc too_long(CNNL_DTYPE_FLOAT, {17});
  const float one = 1.0f;
  const cnnlStatus_t status = cnnlFill_v3(handle_, CNNL_POINTER_MODE_HOST, &one, too_long.desc, device);
  EXPECT_EQ(status, CNNL_STATUS_BAD_PARAM);
  EXPECT_THAT(cnnlGetErrorString(status), HasSubstr("reaches outside its device allocation"));
  cnrtFree(device);
}

// 2048 + 1 + 1 in HALF is 2048 (the spacing at 2048 is 2); accumulated in FP32 it is 2050, which HALF
// holds exactly.
TEST_F(MluEmulator, HalfMatricesAccumulateInFloat) {
  const uint16_t a_bits[3] = {0x6800, 0x3c00, 0x3c00};  // 2048, 1, 1
  const uint16_t b_bits[3] = {0x3c00, 0x3c00, 0x3c00};  // 1, 1, 1
  void *a = nullptr, *b = nullptr, *d = nullptr, *host = nullptr, *workspace = nullptr;
  ASSERT_EQ(cnrtMalloc(&a, 6), cnrtSuccess);
  ASSERT_EQ(cnrtMalloc(&b, 6), cnrtSuccess);
  ASSERT_EQ(cnrtMalloc(&d, 2), cnrtSuccess);
  ASSERT_EQ(cnrtHostMalloc(&host, 16), cnrtSuccess);
  std::memcpy(host, a_bits, 6);
  ASSERT_EQ(cnrtMemcpyAsync_V2(a, host, 6, queue_, cnrtMemcpyHostToDev), cnrtSuccess);
  ASSERT_EQ(cnrtQueueSync(queue_), cnrtSuccess);
  std::memcpy(host, b_bits, 6);
  ASSERT_EQ(cnrtMemcpyAsync_V2(b, host, 6, queue_, cnrtMemcpyHostToDev), cnrtSuccess);
  ASSERT_EQ(cnrtQueueSync(queue_), cnrtSuccess);
  Desc a_desc(CNNL_DTYPE_HALF, {1, 3}), b_desc(CNNL_DTYPE_HALF, {3, 1}), d_desc(CNNL_DTYPE_HALF, {1, 1});
  cnnlMatMulDescriptor_t desc = nullptr;
  cnnlMatMulAlgo_t algo = nullptr;
  cnnlMatMulHeuristicResult_t result = nullptr;
  ASSERT_EQ(cnnlMatMulDescCreate(&desc), CNNL_STATUS_SUCCESS);
  ASSERT_EQ(cnnlMatMulAlgoCreate(&algo), CNNL_STATUS_SUCCESS);
  ASSERT_EQ(cnnlCreateMatMulHeuristicResult(&result), CNNL_STATUS_SUCCESS);
  int count = 0;
  size_t bytes = 0;
  ASSERT_EQ(cnnlGetMatMulAlgoHeuristic(handle_, desc, a_desc.desc, b_desc.desc, d_desc.desc, d_desc.desc, nullptr, 1,
                                       &result, &count),
            CNNL_STATUS_SUCCESS);
  ASSERT_EQ(cnnlGetMatMulHeuristicResult(result, algo, &bytes), CNNL_STATUS_SUCCESS);
  ASSERT_EQ(cnrtMalloc(&workspace, bytes), cnrtSuccess);
  const float alpha = 1, beta = 0;
  ASSERT_EQ(cnnlMatMul_v2(handle_, desc, algo, &alpha, a_desc.desc, a, b_desc.desc, b, &beta, d_desc.desc, d, workspace,
                          bytes, d_desc.desc, d),
            CNNL_STATUS_SUCCESS);
  ASSERT_EQ(cnrtMemcpyAsync_V2(host, d, 2, queue_, cnrtMemcpyDevToHost), cnrtSuccess);
  ASSERT_EQ(cnrtQueueSync(queue_), cnrtSuccess);
  uint16_t bits = 0;
  std::memcpy(&bits, host, 2);
  EXPECT_EQ(bits, 0x6801) << "2050 expected (FP32 accumulation)";
  cnnlDestroyMatMulHeuristicResult(result);
  cnnlMatMulAlgoDestroy(algo);
  cnnlMatMulDescDestroy(desc);
  for (void* p : {a, b, d, workspace}) cnrtFree(p);
  cnrtFreeHost(host);
}

TEST(MluEmulatorDeathTest, HostCodeCannotReadDeviceMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* device = nullptr;
        cnrtMalloc(&device, 4096);
        std::printf("%d\n", *static_cast<volatile const char*>(device));
      },
      "");
}

}  // namespace
