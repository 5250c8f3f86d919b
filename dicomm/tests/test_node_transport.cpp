// The node transport's matching, completion and flow-control rules, with both ranks in this one
// process (a process may always read its own memory with process_vm_readv).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <map>
#include <numeric>
#include <vector>

#include "transport/node_transport.hpp"

namespace {

using h2::dicomm::detail::Completion;
using h2::dicomm::detail::NodeTransport;
using testing::HasSubstr;

// Rank 0 and rank 1 of one node, connected both ways.
class Pair : public testing::Test {
 protected:
  Pair() : zero(0, {0, 1}), one(1, {0, 1}) {
    std::string why;
    EXPECT_TRUE(zero.connect(1, one.address(), why)) << why;
    EXPECT_TRUE(one.connect(0, zero.address(), why)) << why;
    zero.unlink();
    one.unlink();
    zero.enable(1);
    one.enable(0);
  }

  // Polls both sides until nothing more completes; returns every completion by context.
  std::map<void*, Completion> drain() {
    std::map<void*, Completion> all;
    for (int idle = 0; idle < 3;) {
      std::vector<Completion> found;
      zero.poll(found);
      one.poll(found);
      idle = found.empty() ? idle + 1 : 0;
      for (auto& c : found) all[c.context] = c;
    }
    return all;
  }

  static std::vector<float> values(size_t n, float first) {
    std::vector<float> v(n);
    std::iota(v.begin(), v.end(), first);
    return v;
  }

  NodeTransport zero, one;
  int contexts[256] = {};
};

TEST_F(Pair, MessagesOfOneTagMatchInOrderWhetherTheyArriveBeforeOrAfterTheirReceive) {
  // Small messages travel inside the command, large ones are copied from the sender's memory.
  const std::vector<size_t> sizes = {3, 1 << 18, 0, 200, 1 << 20};
  std::vector<std::vector<float>> sent, received;
  for (size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(values(sizes[i], static_cast<float>(100 * i)));
    received.emplace_back(sizes[i], -1.0f);
  }
  // The first two are received after they arrived, the rest were posted before.
  for (size_t i = 0; i < 2; ++i) ASSERT_EQ(zero.post_send(1, sent[i].data(), sizes[i] * 4, 7, &contexts[i]), 0);
  auto done = drain();
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(one.post_recv(0, received[i].data(), sizes[i] * 4, 7, &contexts[100 + i]), 0);
  for (size_t i = 2; i < sizes.size(); ++i)
    ASSERT_EQ(zero.post_send(1, sent[i].data(), sizes[i] * 4, 7, &contexts[i]), 0);
  done.merge(drain());
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(received[i], sent[i]) << "message " << i;
    ASSERT_TRUE(done.count(&contexts[i])) << "send " << i << " completed";
    ASSERT_TRUE(done.count(&contexts[100 + i])) << "receive " << i << " completed";
    EXPECT_EQ(done.at(&contexts[100 + i]).error, 0);
  }
}

// A sender that says where its data lies in exported memory is read through the receiver's mapping
// of it (the opener's answer), and with process_vm_readv where the opener cannot open it or the
// range does not fit in the region.
TEST_F(Pair, ExportedMemoryIsReadThroughTheReceiversMapping) {
  const auto sent = values(1 << 16, 1);
  const auto mapped = values((1 << 16) + 64, 5000);  // what the "mapping" shows, offset by 64 floats
  h2::MemoryExport where;
  where.handle.bytes[0] = 42;
  where.offset = 64 * sizeof(float);
  int opened = 0;
  one.set_shared_memory_opener([&](int peer, const H2_MemHandle& handle) {
    ++opened;
    EXPECT_EQ(peer, 0);
    return handle.bytes[0] == 42
               ? std::span<const char>(reinterpret_cast<const char*>(mapped.data()), mapped.size() * 4)
               : std::span<const char>();
  });
  std::vector<float> through_mapping(sent.size(), -1), refused(sent.size(), -1), outside(sent.size(), -1);
  ASSERT_EQ(one.post_recv(0, through_mapping.data(), sent.size() * 4, 3, &contexts[1]), 0);
  ASSERT_EQ(zero.post_send(1, sent.data(), sent.size() * 4, 3, &contexts[0], &where), 0);
  where.handle.bytes[0] = 7;  // one the opener refuses
  ASSERT_EQ(one.post_recv(0, refused.data(), sent.size() * 4, 3, &contexts[3]), 0);
  ASSERT_EQ(zero.post_send(1, sent.data(), sent.size() * 4, 3, &contexts[2], &where), 0);
  where.handle.bytes[0] = 42;
  where.offset = 65 * sizeof(float);  // one float past the region's end
  ASSERT_EQ(one.post_recv(0, outside.data(), sent.size() * 4, 3, &contexts[5]), 0);
  ASSERT_EQ(zero.post_send(1, sent.data(), sent.size() * 4, 3, &contexts[4], &where), 0);
  const auto done = drain();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(done.count(&contexts[i])) << "operation " << i << " completed";
  EXPECT_EQ(opened, 3);
  EXPECT_EQ(through_mapping, std::vector<float>(mapped.begin() + 64, mapped.begin() + 64 + (1 << 16)));
  EXPECT_EQ(refused, sent);
  EXPECT_EQ(outside, sent);
}

TEST_F(Pair, AReceiveTakesTheFirstMessageWithItsTagAndLeavesOthersWaiting) {
  const auto a = values(4096, 1), b = values(4096, 9000);
  std::vector<float> into_b(4096), into_a(4096);
  ASSERT_EQ(zero.post_send(1, a.data(), a.size() * 4, 1, &contexts[0]), 0);
  ASSERT_EQ(zero.post_send(1, b.data(), b.size() * 4, 2, &contexts[1]), 0);
  ASSERT_EQ(one.post_recv(0, into_b.data(), into_b.size() * 4, 2, &contexts[2]), 0);
  auto done = drain();
  EXPECT_EQ(into_b, b);
  EXPECT_TRUE(done.count(&contexts[1]));
  // The tag-1 message is still waiting, and so is its sender: its data has not been copied.
  EXPECT_FALSE(done.count(&contexts[0]));
  ASSERT_EQ(one.post_recv(0, into_a.data(), into_a.size() * 4, 1, &contexts[3]), 0);
  done = drain();
  EXPECT_EQ(into_a, a);
  EXPECT_TRUE(done.count(&contexts[0]));
  EXPECT_TRUE(done.count(&contexts[3]));
}

TEST_F(Pair, AMessageLargerThanItsReceiveFailsThatReceiveByName) {
  const auto big = values(1 << 16, 0);
  std::vector<float> small(100);
  ASSERT_EQ(one.post_recv(0, small.data(), small.size() * 4, 5, &contexts[1]), 0);
  ASSERT_EQ(zero.post_send(1, big.data(), big.size() * 4, 5, &contexts[0]), 0);
  const auto done = drain();
  ASSERT_TRUE(done.count(&contexts[1]));
  EXPECT_EQ(done.at(&contexts[1]).error, FI_ETRUNC);
  EXPECT_THAT(done.at(&contexts[1]).message,
              HasSubstr("a message of 262144 bytes from rank 0 for a receive of 400 bytes"));
  ASSERT_TRUE(done.count(&contexts[0]));
  EXPECT_NE(done.at(&contexts[0]).error, 0);  // the sender hears of it too
}

TEST_F(Pair, APollCopiesOneMessageSoTheEngineCanSendBeforeTheNext) {
  // Two copied messages and an inline one behind them, all posted for: the first poll copies one,
  // the next poll the other and then the inline one, which waits in order behind it.
  const auto a = values(4096, 1), b = values(4096, 9000), c = values(3, 500);
  std::vector<float> into_a(a.size()), into_b(b.size()), into_c(c.size());
  ASSERT_EQ(one.post_recv(0, into_a.data(), a.size() * 4, 4, &contexts[10]), 0);
  ASSERT_EQ(one.post_recv(0, into_b.data(), b.size() * 4, 4, &contexts[11]), 0);
  ASSERT_EQ(one.post_recv(0, into_c.data(), c.size() * 4, 4, &contexts[12]), 0);
  ASSERT_EQ(zero.post_send(1, a.data(), a.size() * 4, 4, &contexts[0]), 0);
  ASSERT_EQ(zero.post_send(1, b.data(), b.size() * 4, 4, &contexts[1]), 0);
  ASSERT_EQ(zero.post_send(1, c.data(), c.size() * 4, 4, &contexts[2]), 0);
  std::vector<Completion> first, second;
  one.poll(first);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].context, &contexts[10]);
  EXPECT_EQ(into_a, a);
  EXPECT_NE(into_b, b) << "not copied yet";
  one.poll(second);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].context, &contexts[11]);
  EXPECT_EQ(second[1].context, &contexts[12]);
  EXPECT_EQ(into_b, b);
  EXPECT_EQ(into_c, c);
  drain();
}

TEST_F(Pair, SendersWaitForRoomWhenTheReceiverFallsBehind) {
  const auto data = values(1024, 0);  // larger than a command carries: copied, acknowledged
  int sent = 0;
  while (zero.post_send(1, data.data(), data.size() * 4, 3, &contexts[sent % 256]) == 0) ++sent;
  EXPECT_EQ(sent, 64) << "as many as the ring holds, then -FI_EAGAIN";
  std::vector<std::vector<float>> into(static_cast<size_t>(sent), std::vector<float>(1024));
  for (int i = 0; i < sent; ++i) ASSERT_EQ(one.post_recv(0, into[i].data(), 4096, 3, &contexts[128 + i % 64]), 0);
  drain();
  EXPECT_EQ(into.back(), data);
  EXPECT_EQ(zero.post_send(1, data.data(), data.size() * 4, 3, &contexts[0]), 0) << "room again once acknowledged";
}

TEST(NodeTransport, RefusesAnAddressThatIsNotAPeers) {
  NodeTransport zero(0, {0, 1});
  std::string why;
  EXPECT_FALSE(zero.connect(1, "no such segment", why));
  EXPECT_THAT(why, HasSubstr("malformed address"));
  EXPECT_FALSE(zero.connect(1, "/h2-dicomm-does-not-exist 1 4096", why));
  EXPECT_THAT(why, HasSubstr("shm_open(/h2-dicomm-does-not-exist)"));
  EXPECT_FALSE(zero.connect(5, zero.address(), why));
  EXPECT_THAT(why, HasSubstr("not another rank of this node"));
  zero.unlink();
}

}  // namespace
