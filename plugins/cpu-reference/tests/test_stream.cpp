// The cpu-reference stream: an in-order queue drained by its worker. Tasks run one at a time and in
// the order enqueued, while host threads enqueue and synchronize concurrently; event waits capture
// what was enqueued before the record and no more; errors stay sticky; a record on a blocking
// stream becomes visible to waits only once it has its place.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "common.hpp"
#include "stream.hpp"

namespace h2::cpu_reference {
namespace {

using testing::HasSubstr;

// Records the order tasks ran in, and fails the test if two ever overlap.
struct Log {
  std::atomic<bool> busy{false};
  std::atomic<int> overlaps{0};
  std::vector<int> order;  // written only by the one running task

  std::function<void()> task(int index) {
    return [this, index] {
      if (busy.exchange(true)) ++overlaps;
      order.push_back(index);
      std::this_thread::sleep_for(std::chrono::microseconds(index % 7 == 0 ? 200 : 1));
      busy = false;
    };
  }
};

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

TEST(Stream, TasksRunInOrderOneAtATimeWhileHostThreadsSynchronize) {
  auto stream = std::make_shared<Stream>(0, false);
  Log log;
  constexpr int kTasks = 300;
  std::vector<std::thread> synchronizers;
  for (int i = 0; i < kTasks; ++i) {
    stream->enqueue(log.task(i));
    if (i % 50 == 10) synchronizers.emplace_back([&] { stream->synchronize(); });  // while more is enqueued
  }
  stream->synchronize();
  for (auto& synchronizer : synchronizers) synchronizer.join();
  EXPECT_EQ(log.overlaps, 0);
  EXPECT_EQ(log.order, iota(kTasks));
}

TEST(Stream, AnEventWaitRunsTheWorkBeforeItsMarkerAndNoMore) {
  auto stream = std::make_shared<Stream>(0, false);
  Log log;
  for (int i = 0; i < 20; ++i) stream->enqueue(log.task(i));
  Event event(0, false);
  event.record(*stream);
  std::atomic<bool> release{false};
  // Work after the marker that cannot finish until the test lets it: the wait must not run it.
  stream->enqueue([&] {
    while (!release) std::this_thread::sleep_for(std::chrono::microseconds(50));
  });
  event.latest()->wait();
  EXPECT_EQ(log.order, iota(20));
  release = true;
  stream->synchronize();
}

TEST(Stream, AWaitForAnotherStreamsEventOrdersTheWork) {
  auto first = std::make_shared<Stream>(0, false);
  auto second = std::make_shared<Stream>(0, false);
  Log log;
  for (int i = 0; i < 10; ++i) first->enqueue(log.task(i));
  Event event(0, false);
  event.record(*first);
  std::shared_ptr<Marker> marker = event.latest();
  second->enqueue_ordering([marker] { marker->wait(); });
  second->enqueue(log.task(10));  // runs after everything `first` had before the record
  second->synchronize();
  first->synchronize();
  EXPECT_EQ(log.overlaps, 0);
  EXPECT_EQ(log.order, iota(11));
}

TEST(Stream, AFailureIsStickyAndSkipsLaterWork) {
  auto stream = std::make_shared<Stream>(0, false);
  std::atomic<int> ran{0};
  stream->enqueue([] { fail(H2_STATUS_INVALID_ARGUMENT, "index 7 is out of range"); });
  stream->enqueue([&] { ++ran; });
  Event event(0, false);
  event.record(*stream);  // ordering work still runs, so the wait ends
  event.latest()->wait();
  try {
    stream->synchronize();
    FAIL() << "synchronize did not report the failure";
  } catch (const PluginError& e) {
    EXPECT_THAT(e.what(), HasSubstr("index 7 is out of range"));
  }
  EXPECT_EQ(ran, 0);
}

// On a blocking stream a record may wait behind another thread's task. Its marker must not be
// visible to waits until it has its place in the stream: a wait that captured it and got the
// stream first would wait for a marker that can only complete after that wait (a deadlock).
TEST(Stream, ARecordWaitingForABlockingStreamIsNotYetVisibleToWaits) {
  auto stream = std::make_shared<Stream>(0, true);
  std::atomic<bool> running{false}, release{false};
  std::thread busy([&] {
    stream->enqueue([&] {
      running = true;
      while (!release) std::this_thread::sleep_for(std::chrono::microseconds(50));
    });
  });
  while (!running) std::this_thread::sleep_for(std::chrono::microseconds(50));
  Event event(0, false);
  std::atomic<bool> recorded{false};
  std::thread recorder([&] {
    event.record(*stream);
    recorded = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the recorder is now queued behind `busy`
  EXPECT_FALSE(recorded);
  EXPECT_EQ(event.latest(), nullptr);
  release = true;
  busy.join();
  recorder.join();
  ASSERT_NE(event.latest(), nullptr);
  event.latest()->wait();  // complete: a blocking stream ran it before record returned
}

}  // namespace
}  // namespace h2::cpu_reference
