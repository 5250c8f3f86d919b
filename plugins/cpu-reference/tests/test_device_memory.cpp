// The cpu-reference device allocator: alignment, capacity, coalescing, and the bounds checks that
// turn a bad device pointer into an error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common.hpp"
#include "device_memory.hpp"

namespace h2::cpu_reference {
namespace {

using testing::HasSubstr;

std::string message_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const PluginError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(DeviceMemory, AllocationsAreAlignedAndDisjoint) {
  DeviceMemory memory(0, 1 << 20, false);
  std::vector<char*> blocks;
  for (size_t size : {1, 255, 256, 257, 1000, 4096}) {
    auto* p = static_cast<char*>(memory.allocate(size));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % DeviceMemory::kAlignment, 0u);
    std::memset(memory.resolve(p, size, "block"), 0xab, size);
    for (char* other : blocks) EXPECT_NE(p, other);
    blocks.push_back(p);
  }
}

TEST(DeviceMemory, CapacityIsEnforcedAndFreeBytesTracked) {
  DeviceMemory memory(3, 1 << 20, false);
  void* a = memory.allocate(512 << 10);
  EXPECT_EQ(memory.free_bytes(), 512u << 10);
  EXPECT_THAT(message_of([&] { memory.allocate(600 << 10); }),
              HasSubstr("device 3 out of memory: requested 600.00 KiB, 512.00 KiB free of 1.00 MiB"));
  memory.release(a);
  EXPECT_EQ(memory.free_bytes(), 1u << 20);
  EXPECT_NO_THROW(memory.allocate(1 << 20));
}

TEST(DeviceMemory, FreedNeighboursMergeBackIntoOneBlock) {
  DeviceMemory memory(0, 4 << 10, false);
  void* a = memory.allocate(1024);
  void* b = memory.allocate(1024);
  void* c = memory.allocate(1024);
  void* d = memory.allocate(1024);
  memory.release(a);
  memory.release(c);
  EXPECT_THAT(message_of([&] { memory.allocate(2048); }), HasSubstr("fragmented"));
  memory.release(b);  // a, b, c merge
  void* big = memory.allocate(3072);
  EXPECT_EQ(big, a);
  memory.release(big);
  memory.release(d);
  EXPECT_EQ(memory.allocate(4096), a);
}

TEST(DeviceMemory, ResolveChecksTheRangeAgainstTheLiveAllocation) {
  DeviceMemory memory(1, 1 << 20, false);
  auto* p = static_cast<char*>(memory.allocate(100));
  EXPECT_NO_THROW(memory.resolve(p, 100, "source"));
  EXPECT_NO_THROW(memory.resolve(p + 40, 60, "source"));
  EXPECT_THAT(message_of([&] { memory.resolve(p + 40, 61, "source"); }),
              HasSubstr("runs 1 bytes past the end of its allocation"));
  EXPECT_THAT(message_of([&] { memory.resolve(p + 200, 1, "destination"); }), HasSubstr("destination"));
  memory.release(p);
  EXPECT_THAT(message_of([&] { memory.resolve(p, 1, "source"); }), HasSubstr("is not inside a live allocation"));
  int on_stack = 0;
  EXPECT_THAT(message_of([&] { memory.resolve(&on_stack, 4, "source"); }),
              HasSubstr("is not device memory of device 1"));
}

TEST(DeviceMemory, ReleaseRejectsWhatItDidNotHandOut) {
  DeviceMemory memory(0, 1 << 20, false);
  auto* p = static_cast<char*>(memory.allocate(1024));
  EXPECT_THAT(message_of([&] { memory.release(p + 256); }), HasSubstr("not the start of a live allocation"));
  memory.release(p);
  EXPECT_THAT(message_of([&] { memory.release(p); }), HasSubstr("already freed?"));
}

TEST(DeviceMemory, StrictModeHandsOutAddressesApartFromTheShadowView) {
  DeviceMemory memory(0, 1 << 20, true);
  EXPECT_TRUE(memory.strict());
  auto* p = static_cast<char*>(memory.allocate(64));
  void* shadow = memory.resolve(p, 64, "block");
  EXPECT_NE(shadow, static_cast<void*>(p));
  std::memset(shadow, 1, 64);  // the plugin's own view is writable
  EXPECT_TRUE(memory.contains(p));
  EXPECT_FALSE(memory.contains(shadow));
}

}  // namespace
}  // namespace h2::cpu_reference
