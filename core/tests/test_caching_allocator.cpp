// The caching allocator against a scripted plugin: which block a request gets, when a freed block may
// be reused, what it asks the plugin for, and what it says when memory runs out. The script records
// every memory call and decides when events complete, so each rule is checked without timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "caching_allocator.hpp"
#include "h2/error.hpp"
#include "plugin_handle.hpp"
#include "test_support.hpp"

namespace h2::detail {
namespace {

using testing::HasSubstr;

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

// The scripted plugin's state: one device of `capacity` bytes, streams and events as plain tokens.
struct Script {
  size_t capacity = 64 * MiB;
  size_t used = 0;
  std::map<void*, size_t> live;
  std::vector<std::string> calls;      // "alloc 2097152", "free_async S", "wait S on T", ...
  std::set<H2_Stream*> busy_streams;   // an event recorded on one of these stays incomplete
  std::set<H2_Event*> pending_events;  // recorded on a busy stream and not yet completed
  std::map<H2_Event*, H2_Stream*> recorded_on;
  uintptr_t next_event = 0x9000;
  bool fail_records = false;
  std::string error;
};
Script* script = nullptr;

H2_Stream* const S = reinterpret_cast<H2_Stream*>(uintptr_t{0x1000});
H2_Stream* const T = reinterpret_cast<H2_Stream*>(uintptr_t{0x2000});

std::string stream_name(H2_Stream* stream) {
  return stream == S ? "S" : stream == T ? "T" : "?";
}

H2_Status allocate(size_t bytes, void** ptr) {
  if (script->used + bytes > script->capacity) {
    script->error = "the scripted device has " + std::to_string(script->capacity - script->used) + " bytes free";
    return H2_STATUS_OUT_OF_MEMORY;
  }
  *ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  script->used += bytes;
  script->live[*ptr] = bytes;
  return H2_STATUS_OK;
}
void release_memory(void* ptr) {
  script->used -= script->live.at(ptr);
  script->live.erase(ptr);
  std::free(ptr);
}

H2_Status mem_alloc(int32_t, size_t bytes, void** ptr) {
  script->calls.push_back("alloc " + std::to_string(bytes));
  return allocate(bytes, ptr);
}
H2_Status mem_free(int32_t, void* ptr) {
  script->calls.push_back("free");
  release_memory(ptr);
  return H2_STATUS_OK;
}
H2_Status mem_alloc_async(int32_t, size_t bytes, H2_Stream* stream, void** ptr) {
  script->calls.push_back("alloc_async " + std::to_string(bytes) + " " + stream_name(stream));
  return allocate(bytes, ptr);
}
H2_Status mem_free_async(int32_t, void* ptr, H2_Stream* stream) {
  script->calls.push_back("free_async " + stream_name(stream));
  release_memory(ptr);
  return H2_STATUS_OK;
}
H2_Status mem_info(int32_t, uint64_t* free_bytes, uint64_t* total_bytes) {
  *free_bytes = script->capacity - script->used;
  *total_bytes = script->capacity;
  return H2_STATUS_OK;
}
H2_Status event_create(int32_t, uint32_t, H2_Event** event) {
  *event = reinterpret_cast<H2_Event*>(script->next_event += 0x10);
  return H2_STATUS_OK;
}
H2_Status event_destroy(H2_Event*) {
  return H2_STATUS_OK;
}
H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  if (script->fail_records) {
    script->error = "the scripted device is lost";
    return H2_STATUS_DEVICE_ERROR;
  }
  script->calls.push_back("record on " + stream_name(stream));
  script->recorded_on[event] = stream;
  if (script->busy_streams.count(stream)) {
    script->pending_events.insert(event);
  } else {
    script->pending_events.erase(event);
  }
  return H2_STATUS_OK;
}
H2_Status event_query(H2_Event* event) {
  return script->pending_events.count(event) ? H2_STATUS_NOT_READY : H2_STATUS_OK;
}
H2_Status event_synchronize(H2_Event* event) {
  script->calls.push_back("event_synchronize");
  script->pending_events.erase(event);
  return H2_STATUS_OK;
}
H2_Status stream_wait_event(H2_Stream* stream, H2_Event* event) {
  script->calls.push_back("wait " + stream_name(stream) + " on " + stream_name(script->recorded_on.at(event)));
  return H2_STATUS_OK;
}
const char* last_error() {
  return script->error.c_str();
}

class CachingAllocatorTest : public testing::Test {
 protected:
  void SetUp() override { script = &state_; }
  void TearDown() override {
    handle_.reset();
    while (!state_.live.empty()) release_memory(state_.live.begin()->first);  // what tests left allocated
    script = nullptr;
  }

  // An allocator for the scripted plugin, with or without the stream-ordered slots.
  CachingAllocator& make(bool async_slots = false) {
    H2_PluginApi api{};
    api.last_error = last_error;
    api.mem_alloc = mem_alloc;
    api.mem_free = mem_free;
    api.mem_info = mem_info;
    api.event_create = event_create;
    api.event_destroy = event_destroy;
    api.event_record = event_record;
    api.event_query = event_query;
    api.event_synchronize = event_synchronize;
    api.stream_wait_event = stream_wait_event;
    if (async_slots) {
      api.mem_alloc_async = mem_alloc_async;
      api.mem_free_async = mem_free_async;
    }
    handle_ = std::make_unique<PluginHandle>(nullptr, api, H2_OpTable{}, H2_CollectiveTable{}, "scripted");
    handle_->make_allocators(1);
    allocator_ = &handle_->allocator(0);
    return *allocator_;
  }

  // The tests hold pointers; the allocator's tokens for them are kept here.
  void* alloc(size_t bytes, H2_Stream* stream) {
    const CachingAllocator::Allocated memory = allocator_->allocate(bytes, stream);
    tokens_[memory.ptr] = memory.token;
    return memory.ptr;
  }
  void release(void* ptr) {
    allocator_->free(ptr, tokens_.at(ptr));
    tokens_.erase(ptr);
  }
  void record(void* ptr, H2_Stream* stream) { allocator_->record_stream(ptr, tokens_.at(ptr), stream); }

  CachingAllocator* allocator_ = nullptr;
  std::map<void*, void*> tokens_;

  Script state_;
  std::unique_ptr<PluginHandle> handle_;
};

TEST_F(CachingAllocatorTest, ABlockFreedOnAStreamIsReusedAtOnceForThatStream) {
  CachingAllocator& allocator = make();
  void* first = alloc(4 * KiB, S);
  release(first);
  EXPECT_EQ(alloc(4 * KiB, S), first);
  const MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.allocations, 2u);
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.plugin_allocations, 1u);
  EXPECT_EQ(stats.reserved_bytes, CachingAllocator::kSmallSegment);
  EXPECT_EQ(state_.calls, std::vector<std::string>{"alloc 2097152"});
}

TEST_F(CachingAllocatorTest, AnotherStreamNeverGetsABlockWhileItsStreamLives) {
  CachingAllocator& allocator = make();
  void* on_s = alloc(4 * KiB, S);
  release(on_s);
  void* on_t = alloc(4 * KiB, T);
  EXPECT_NE(on_t, on_s);
  EXPECT_EQ(allocator.stats().plugin_allocations, 2u);
}

TEST_F(CachingAllocatorTest, SegmentsOfARetiredStreamServeAnyStream) {
  CachingAllocator& allocator = make();
  void* on_s = alloc(4 * KiB, S);
  release(on_s);
  allocator.stream_retired(S);
  EXPECT_EQ(alloc(4 * KiB, T), on_s);
  EXPECT_EQ(allocator.stats().plugin_allocations, 1u);
}

TEST_F(CachingAllocatorTest, ABlockAnotherStreamUsedWaitsForThatStreamsEvent) {
  make();
  void* block = alloc(4 * KiB, S);
  record(block, T);
  state_.busy_streams.insert(T);  // T's work on the block is still running when it is freed
  release(block);
  EXPECT_EQ(state_.calls.back(), "record on T");
  void* meanwhile = alloc(4 * KiB, S);
  EXPECT_NE(meanwhile, block);
  state_.pending_events.clear();  // T reaches the event
  EXPECT_EQ(alloc(4 * KiB, S), block);
  // No event was waited for on the host.
  EXPECT_EQ(std::count(state_.calls.begin(), state_.calls.end(), "event_synchronize"), 0);
}

// If the event that would order another stream's use cannot be recorded, the block is never
// reused: the free fails and the memory stays counted as allocated.
TEST_F(CachingAllocatorTest, AFreeWhoseEventCannotBeRecordedKeepsTheBlock) {
  CachingAllocator& allocator = make();
  void* block = alloc(4 * KiB, S);
  record(block, T);
  state_.fail_records = true;
  EXPECT_THAT([&] { allocator.free(block, tokens_.at(block)); },
              testing::ThrowsMessage<Error>(HasSubstr("the scripted device is lost")));
  EXPECT_EQ(allocator.stats().allocated_bytes, 4 * KiB);
  state_.fail_records = false;
  EXPECT_NE(alloc(4 * KiB, S), block);
}

TEST_F(CachingAllocatorTest, RecordingTheStreamTheBlockWasMadeForChangesNothing) {
  make();
  void* block = alloc(4 * KiB, S);
  record(block, S);
  release(block);
  EXPECT_EQ(alloc(4 * KiB, S), block);
  EXPECT_EQ(std::count(state_.calls.begin(), state_.calls.end(), "record on S"), 0);
}

TEST_F(CachingAllocatorTest, BlocksSplitFromOneSegmentAndMergeWhenFreed) {
  CachingAllocator& allocator = make();
  // Small pool: neighbours in one 2 MiB segment, requests rounded to 512 bytes.
  auto* a = static_cast<char*>(alloc(4 * KiB, S));
  auto* b = static_cast<char*>(alloc(1000, S));
  auto* c = static_cast<char*>(alloc(4 * KiB, S));
  EXPECT_EQ(b, a + 4 * KiB);
  EXPECT_EQ(c, b + 1024);
  EXPECT_EQ(allocator.stats().allocated_bytes, 9 * KiB);
  EXPECT_EQ(allocator.stats().requested_bytes, 8 * KiB + 1000);
  release(a);
  release(c);
  release(b);  // merges with both neighbours: the segment is one free block again
  EXPECT_EQ(alloc(CachingAllocator::kSmallRequest, S), a);
  // Large pool: two 3 MiB blocks of one 20 MiB segment merge into one that holds 12 MiB.
  auto* x = static_cast<char*>(alloc(3 * MiB, S));
  auto* y = static_cast<char*>(alloc(3 * MiB, S));
  EXPECT_EQ(y, x + 3 * MiB);
  release(x);
  release(y);
  EXPECT_EQ(alloc(12 * MiB, S), x);
  EXPECT_EQ(allocator.stats().plugin_allocations, 2u);  // one small and one large segment
}

TEST_F(CachingAllocatorTest, ARestTooSmallToKeepStaysWithTheBlock) {
  CachingAllocator& allocator = make();
  void* large = alloc(19 * MiB + 512 * KiB, S);  // from a 20 MiB segment: 512 KiB left
  release(large);
  void* again = alloc(19 * MiB + 512 * KiB, S);
  EXPECT_EQ(again, large);
  EXPECT_EQ(allocator.stats().allocated_bytes, 20 * MiB);  // the rest is not worth a block of its own
}

TEST_F(CachingAllocatorTest, OutOfMemoryGivesTheCacheBackAndRetriesOnce) {
  state_.capacity = 24 * MiB;
  CachingAllocator& allocator = make();
  release(alloc(3 * MiB, S));      // a 20 MiB segment cached for S
  void* on_t = alloc(3 * MiB, T);  // another 20 MiB fits only without S's
  EXPECT_NE(on_t, nullptr);
  const MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.cache_flushes, 1u);
  EXPECT_EQ(stats.plugin_frees, 1u);
  EXPECT_EQ(stats.reserved_bytes, 20 * MiB);
  EXPECT_EQ(state_.calls, (std::vector<std::string>{"alloc 20971520", "alloc 20971520", "free", "alloc 20971520"}));
}

TEST_F(CachingAllocatorTest, WhenNothingFitsTheErrorNamesTheDeviceTheRequestAndWhereTheMemoryIs) {
  state_.capacity = 24 * MiB;
  make();
  alloc(3 * MiB, S);  // holds 3 MiB of a 20 MiB segment: 17 MiB cached for S
  try {
    alloc(8 * MiB, T);
    FAIL() << "8 MiB must not fit beside a 20 MiB segment on a 24 MiB device";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), HasSubstr("scripted:0: out of memory: 8.00 MiB for a buffer do not fit"));
    EXPECT_THAT(e.what(), HasSubstr("buffers hold 3.00 MiB, the cache holds 17.00 MiB"));
    EXPECT_THAT(e.what(), HasSubstr("the device has 4.00 MiB free of 24.00 MiB"));
    EXPECT_THAT(e.what(), HasSubstr("(scripted: the scripted device has 4194304 bytes free)"));
  }
  // After the segment-sized try, one of just the request's size was tried as well.
  EXPECT_EQ(state_.calls.back(), "alloc 8388608");
}

TEST_F(CachingAllocatorTest, StatsTrackPeaksUntilReset) {
  CachingAllocator& allocator = make();
  void* a = alloc(600 * KiB, S);
  void* b = alloc(400 * KiB, S);
  release(a);
  release(b);
  MemoryStats stats = allocator.stats();
  EXPECT_EQ(stats.allocated_bytes, 0u);
  EXPECT_EQ(stats.peak_allocated_bytes, 1000 * KiB);
  EXPECT_EQ(stats.peak_reserved_bytes, 2 * MiB);
  EXPECT_EQ(stats.cached_bytes(), 2 * MiB);
  allocator.reset_peak();
  release(alloc(1 * KiB, S));
  EXPECT_EQ(allocator.stats().peak_allocated_bytes, 1 * KiB);
  allocator.empty_cache();
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
  EXPECT_EQ(state_.calls.back(), "free");
}

TEST_F(CachingAllocatorTest, SegmentsComeFromTheStreamOrderedSlotsWhenThePluginHasThem) {
  CachingAllocator& allocator = make(/*async_slots=*/true);
  // A new segment is work enqueued on the stream (Device::allocate counts it); a cache hit is not.
  const CachingAllocator::Allocated first = allocator.allocate(4 * KiB, S);
  EXPECT_TRUE(first.enqueued);
  allocator.free(first.ptr, first.token);
  const CachingAllocator::Allocated again = allocator.allocate(4 * KiB, S);
  EXPECT_FALSE(again.enqueued);
  allocator.free(again.ptr, again.token);
  allocator.empty_cache();
  // Emptying the cache frees with the blocking mem_free, so the memory is free when it returns.
  EXPECT_EQ(state_.calls, (std::vector<std::string>{"alloc_async 2097152 S", "free"}));
}

TEST_F(CachingAllocatorTest, WithoutCachingEveryBufferIsAPluginAllocationFreedInStreamOrder) {
  test::ScopedEnv off("H2_ALLOCATOR", "plugin");
  CachingAllocator& allocator = make(/*async_slots=*/true);
  EXPECT_FALSE(allocator.stats().caching);
  void* block = alloc(1000, S);
  record(block, T);
  release(block);
  // T's use is ordered before the free on S, and nothing waits on the host.
  EXPECT_EQ(state_.calls,
            (std::vector<std::string>{"alloc_async 1000 S", "record on T", "wait S on T", "free_async S"}));
  EXPECT_EQ(allocator.stats().reserved_bytes, 0u);
}

TEST_F(CachingAllocatorTest, WithoutCachingOrAsyncSlotsFreeingIsThePluginsBlockingFree) {
  test::ScopedEnv off("H2_ALLOCATOR", "plugin");
  make();
  release(alloc(1000, S));
  EXPECT_EQ(state_.calls, (std::vector<std::string>{"alloc 1000", "free"}));
}

TEST_F(CachingAllocatorTest, AnUnknownAllocatorChoiceIsRefusedNamingTheVariable) {
  test::ScopedEnv bad("H2_ALLOCATOR", "bfc");
  EXPECT_THAT([&] { make(); }, testing::ThrowsMessage<Error>(HasSubstr("H2_ALLOCATOR='bfc' is not an allocator")));
}

TEST_F(CachingAllocatorTest, FreeingWhatItDidNotHandOutOrTookBackIsAnError) {
  CachingAllocator& allocator = make();
  int other = 0;
  EXPECT_THAT([&] { allocator.free(&other, nullptr); },
              testing::ThrowsMessage<Error>(HasSubstr("free of memory the caching allocator did not hand out")));
  const CachingAllocator::Allocated memory = allocator.allocate(64, S);
  allocator.free(memory.ptr, memory.token);
  EXPECT_THAT([&] { allocator.free(memory.ptr, memory.token); },
              testing::ThrowsMessage<Error>(HasSubstr("(or already took back)")));
  EXPECT_THAT([&] { alloc(0, S); }, testing::ThrowsMessage<Error>(HasSubstr("cannot allocate 0 bytes")));
}

}  // namespace
}  // namespace h2::detail
