// Stream and event semantics on the plugin under test (cpu-reference, whose streams are real worker
// threads, or another plugin when meson test sets H2_TEST_PLUGIN): ordering within a stream, ordering
// across streams through events, query and synchronize under concurrency, and event timing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using testing::HasSubstr;

class Streams : public testing::Test {
 protected:
  Streams() : runtime_(test::plugin_under_test_only()), device_(runtime_.device(test::plugin_under_test(), 0)) {}
  Runtime runtime_;
  Device device_;
};

std::vector<uint8_t> read_back(Stream& stream, const DeviceBuffer& buffer, size_t bytes, size_t offset = 0) {
  std::vector<uint8_t> host(bytes);
  stream.copy_to_host(host.data(), buffer, bytes, offset);
  stream.synchronize();
  return host;
}

TEST_F(Streams, CopiesRoundTripThroughTheDevice) {
  Stream stream = device_.create_stream();
  std::vector<uint8_t> data(1 << 20);
  std::iota(data.begin(), data.end(), 0);
  DeviceBuffer a = device_.allocate(data.size());
  DeviceBuffer b = device_.allocate(data.size());
  stream.copy_from_host(a, data.data(), data.size());
  stream.copy(b, 0, a, 0, data.size());
  EXPECT_EQ(read_back(stream, b, data.size()), data);
}

TEST_F(Streams, WorkOnOneStreamRunsInOrder) {
  Stream stream = device_.create_stream();
  DeviceBuffer buffer = device_.allocate(4096);
  // Each step overwrites a growing prefix; only in-order execution leaves this exact staircase.
  for (int step = 0; step < 64; ++step)
    stream.memset(buffer, static_cast<uint8_t>(step), 0, 4096 - static_cast<size_t>(step) * 64);
  std::vector<uint8_t> host = read_back(stream, buffer, 4096);
  for (size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], std::min<size_t>(63, (4095 - i) / 64)) << "byte " << i;
}

TEST_F(Streams, EventsOrderWorkAcrossTwoStreams) {
  constexpr size_t kBytes = 8 << 20;
  constexpr int kRounds = 40;
  Stream producer = device_.create_stream();
  Stream consumer = device_.create_stream();
  DeviceBuffer shared = device_.allocate(kBytes);
  DeviceBuffer snapshot = device_.allocate(kBytes * kRounds);
  std::vector<Event> produced;
  std::vector<Event> consumed;
  for (int round = 0; round < kRounds; ++round) {
    // The producer may only overwrite the buffer once the consumer has copied the previous round.
    if (round > 0) producer.wait(consumed.back());
    producer.memset(shared, static_cast<uint8_t>(round + 1));
    produced.push_back(device_.create_event());
    produced.back().record(producer);
    consumer.wait(produced.back());
    consumer.copy(snapshot, static_cast<size_t>(round) * kBytes, shared, 0, kBytes);
    consumed.push_back(device_.create_event());
    consumed.back().record(consumer);
  }
  consumer.synchronize();
  for (int round = 0; round < kRounds; ++round) {
    std::vector<uint8_t> host = read_back(consumer, snapshot, kBytes, static_cast<size_t>(round) * kBytes);
    ASSERT_TRUE(std::all_of(host.begin(), host.end(), [&](uint8_t v) { return v == round + 1; }))
        << "round " << round << " saw another round's data";
  }
}

TEST_F(Streams, ReRecordingAnEventDoesNotReleaseAnEarlierWait) {
  constexpr size_t kBytes = 64 << 20;
  Stream slow = device_.create_stream();
  Stream fast = device_.create_stream();
  Stream waiter = device_.create_stream();
  DeviceBuffer big = device_.allocate(kBytes);
  DeviceBuffer flag = device_.allocate(1);
  DeviceBuffer seen = device_.allocate(1);
  Event event = device_.create_event();

  slow.memset(flag, 0);
  for (int i = 0; i < 8; ++i) slow.memset(big, static_cast<uint8_t>(i));
  slow.memset(flag, 1);
  event.record(slow);
  waiter.wait(event);  // captures the record on `slow`
  event.record(fast);  // an empty stream: completes at once
  waiter.copy(seen, 0, flag, 0, 1);
  EXPECT_EQ(read_back(waiter, seen, 1)[0], 1) << "the wait was released by the later record";
}

TEST_F(Streams, WaitingOnANeverRecordedEventIsANoOp) {
  Stream stream = device_.create_stream();
  Event never = device_.create_event();
  EXPECT_TRUE(never.ready());
  stream.wait(never);
  stream.synchronize();
}

TEST_F(Streams, QueryNeverReportsIdleWhileWorkIsQueuedOrRunning) {
  constexpr size_t kBytes = 256 << 20;
  Stream stream = device_.create_stream();
  Stream checker = device_.create_stream();
  DeviceBuffer buffer = device_.allocate(kBytes);
  DeviceBuffer tail = device_.allocate(4096);
  Stream setup = device_.create_stream();
  setup.memset(buffer, 0);
  setup.synchronize();

  // memset writes front to back, so the last page is written last. Whenever the stream says it is
  // idle, a copy of that page on an unrelated stream must already see the new value.
  for (int round = 1; round <= 3; ++round) {
    stream.memset(buffer, static_cast<uint8_t>(round));
    Event done = device_.create_event();
    done.record(stream);
    while (!stream.ready()) std::this_thread::yield();
    EXPECT_TRUE(done.ready()) << "the stream reported idle before its own event completed";
    checker.copy(tail, 0, buffer, kBytes - 4096, 4096);
    std::vector<uint8_t> host = read_back(checker, tail, 4096);
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [&](uint8_t v) { return v == round; }))
        << "the stream reported idle while its memset was still running";
  }
}

// The core answers ready() itself while nothing was enqueued since the plugin last said the stream
// was idle. An op reaches the plugin through the handle, not through a Stream method, and must make
// ready() ask the plugin again; so must moving the stream.
TEST_F(Streams, ReadyAsksThePluginAgainOnceAnOpIsEnqueued) {
  constexpr int64_t kCount = 32 << 20;  // floats: milliseconds of work on cpu-reference
  if (!device_.op_capability(H2_OP_FILL)) GTEST_SKIP() << test::plugin_under_test() << " has no fill operator";
  Stream stream = device_.create_stream();
  Stream checker = device_.create_stream();
  const Tensor values = Tensor::empty(device_, {kCount}, DType::f32);
  ops::fill(stream, values, 0);
  stream.synchronize();
  for (int round = 1; round <= 3; ++round) {
    ASSERT_TRUE(stream.ready());
    ops::fill(stream, values, round);
    if (round == 2) stream = Stream(std::move(stream));
    while (!stream.ready()) std::this_thread::yield();
    // Idle means done: the last element, written last, already holds the new value.
    EXPECT_EQ(values.slice(0, kCount - 1, kCount).to_host(checker)[0], round)
        << "the stream reported idle while its fill was still running";
  }
}

TEST_F(Streams, AWaitingStreamIsNotReadyBeforeTheEventItWaitsFor) {
  constexpr size_t kBytes = 128 << 20;
  Stream busy = device_.create_stream();
  Stream waiting = device_.create_stream();
  DeviceBuffer buffer = device_.allocate(kBytes);
  for (int i = 0; i < 4; ++i) busy.memset(buffer, static_cast<uint8_t>(i));
  Event event = device_.create_event();
  event.record(busy);
  waiting.wait(event);
  // Poll both: the waiting stream may only become ready after the event has.
  for (;;) {
    bool waiting_ready = waiting.ready();
    if (waiting_ready) {
      EXPECT_TRUE(event.ready());
      break;
    }
    std::this_thread::yield();
  }
  busy.synchronize();
}

TEST_F(Streams, ElapsedTimesAreNonNegativeAndOrdered) {
  Stream stream = device_.create_stream();
  DeviceBuffer buffer = device_.allocate(32 << 20);
  Event start = device_.create_event();
  Event middle = device_.create_event();
  Event end = device_.create_event();
  start.record(stream);
  stream.memset(buffer, 1);
  middle.record(stream);
  stream.memset(buffer, 2);
  end.record(stream);
  end.synchronize();
  ASSERT_TRUE(start.ready() && middle.ready());
  const float first = Event::elapsed_ms(start, middle);
  const float total = Event::elapsed_ms(start, end);
  EXPECT_GE(first, 0.0f);
  EXPECT_GE(total, first);
  EXPECT_EQ(Event::elapsed_ms(start, start), 0.0f);
}

TEST_F(Streams, ElapsedTimeNeedsTimingAndRecordedEvents) {
  Stream stream = device_.create_stream();
  Event timed = device_.create_event();
  Event untimed = device_.create_event(false);
  Event never = device_.create_event();
  timed.record(stream);
  untimed.record(stream);
  stream.synchronize();
  EXPECT_THAT([&] { Event::elapsed_ms(timed, untimed); },
              testing::ThrowsMessage<Error>(HasSubstr("H2_EVENT_DISABLE_TIMING")));
  EXPECT_THAT([&] { Event::elapsed_ms(timed, never); },
              testing::ThrowsMessage<Error>(HasSubstr("never been recorded")));
}

TEST_F(Streams, CopiesAreCheckedAgainstTheirBuffers) {
  Stream stream = device_.create_stream();
  DeviceBuffer buffer = device_.allocate(100);
  std::vector<uint8_t> host(200);
  EXPECT_THAT([&] { stream.copy_from_host(buffer, host.data(), 101); },
              testing::ThrowsMessage<Error>(HasSubstr("outside its 100-byte buffer")));
  EXPECT_THAT([&] { stream.copy_to_host(host.data(), buffer, 10, 95); },
              testing::ThrowsMessage<Error>(HasSubstr("outside its 100-byte buffer")));
  EXPECT_THAT([&] { stream.copy(buffer, 0, buffer, 10, 50); }, testing::ThrowsMessage<Error>(HasSubstr("overlap")));
  DeviceBuffer empty;
  EXPECT_THAT([&] { stream.memset(empty, 0); }, testing::ThrowsMessage<Error>(HasSubstr("buffer is empty")));
}

TEST_F(Streams, ManyThreadsUseTheirOwnStreamsAtOnce) {
  constexpr int kThreads = 8;
  constexpr size_t kBytes = 1 << 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        Stream stream = device_.create_stream();
        DeviceBuffer a = device_.allocate(kBytes);
        DeviceBuffer b = device_.allocate(kBytes);
        std::vector<uint8_t> pattern(kBytes);
        for (size_t i = 0; i < kBytes; ++i) pattern[i] = static_cast<uint8_t>(i * 7 + static_cast<size_t>(t));
        for (int round = 0; round < 20; ++round) {
          stream.copy_from_host(a, pattern.data(), kBytes);
          stream.copy(b, 0, a, 0, kBytes);
          stream.memset(a, 0);
          if (read_back(stream, b, kBytes) != pattern) ++failures;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_F(Streams, OneStreamSharedByManyThreadsStaysConsistent) {
  constexpr int kThreads = 6;
  Stream stream = device_.create_stream();
  DeviceBuffer counters = device_.allocate(kThreads * 4096);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        stream.memset(counters, static_cast<uint8_t>(i), static_cast<size_t>(t) * 4096, 4096);
        if (i % 50 == 0) stream.ready();
      }
      stream.synchronize();
    });
  }
  for (auto& thread : threads) thread.join();
  std::vector<uint8_t> host = read_back(stream, counters, kThreads * 4096);
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](uint8_t v) { return v == 199; }));
}

TEST(MultiDevice, CopiesBetweenTwoDevicesOfOnePluginOrderedByAnEvent) {
  test::ScopedEnv devices("H2_CPU_REFERENCE_DEVICES", "2");  // the Ascend emulator has 2 by default
  const std::string plugin = test::plugin_under_test();
  Runtime runtime(test::plugin_under_test_only());
  ASSERT_EQ(runtime.devices().size(), 2u);
  Device first = runtime.device(plugin, 0);
  Device second = runtime.device(plugin, 1);
  Stream on_first = first.create_stream();
  Stream on_second = second.create_stream();
  std::vector<uint8_t> data(4 << 20);
  std::iota(data.begin(), data.end(), 3);
  DeviceBuffer a = first.allocate(data.size());
  DeviceBuffer b = second.allocate(data.size());
  on_first.copy_from_host(a, data.data(), data.size());
  Event written = first.create_event();
  written.record(on_first);
  on_second.wait(written);
  on_second.copy(b, 0, a, 0, data.size());
  EXPECT_EQ(read_back(on_second, b, data.size()), data);
  EXPECT_THAT([&] { on_second.memset(a, 0); },
              testing::ThrowsMessage<Error>(HasSubstr("the buffer is on " + plugin + ":0")));
}

}  // namespace
}  // namespace h2
