// The label every fabric message carries (PartLabel) and the rules a receive checks its parts by
// (receive_mismatch), in both widths: 64 bits (tcp;ofi_rxm, shm) and 32 (verbs;ofi_rxm, whose
// immediate data is an InfiniBand immediate), which no provider on this machine has.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "transport/engine.hpp"

namespace h2::dicomm::detail {
namespace {

using testing::HasSubstr;

// An operation of `bytes` from or to rank 3, cut as the Engine cuts it with `message_bytes`.
const Op& operation(size_t bytes, size_t message_bytes) {
  static std::vector<std::unique_ptr<Op>> made;  // Op holds an atomic: neither copied nor moved
  Op& op = *made.emplace_back(std::make_unique<Op>());
  op.peer = 3;
  op.bytes = bytes;
  op.cut(message_bytes);
  return op;
}

// What a part of a message sent as `sender` carries: its label in `bits`, and the bytes that land.
Completion arrival(const Op& sender, size_t part, unsigned bits) {
  return {nullptr, 0, "", sender.part_size(part), sender.label(part).encode(bits)};
}

TEST(PartLabel, RoundTripsEveryPartOfSixteen) {
  for (size_t part = 0; part < PartLabel::kMaxParts; ++part) {
    const PartLabel label{uint64_t{1} << 30, part, PartLabel::kMaxParts};
    const PartLabel back = PartLabel::decode(label.encode(64));
    EXPECT_EQ(back.message_bytes, label.message_bytes);
    EXPECT_EQ(back.part, part);
    EXPECT_EQ(back.parts, PartLabel::kMaxParts);
  }
}

TEST(PartLabel, ShortLabelsFitThirtyTwoBitsAndSaturateTheSize) {
  const PartLabel small{4096, 2, 3};
  EXPECT_LT(small.encode(32), uint64_t{1} << 32);
  EXPECT_EQ(PartLabel::decode(small.encode(32)).message_bytes, 4096u);
  const PartLabel large{uint64_t{64} << 20, 15, 16};
  EXPECT_LT(large.encode(32), uint64_t{1} << 32);
  const PartLabel back = PartLabel::decode(large.encode(32));
  EXPECT_EQ(back.message_bytes, (uint64_t{1} << 24) - 1);
  EXPECT_EQ(back.part, 15u);
  EXPECT_EQ(back.parts, 16u);
}

TEST(ReceiveMismatch, EveryPartOfTheSameMessagePasses) {
  for (unsigned bits : {64u, 32u}) {
    for (size_t bytes : {size_t{100}, size_t{3} << 20, size_t{40} << 20}) {
      const Op& op = operation(bytes, 512 << 10);
      for (size_t part = 0; part < op.parts; ++part)
        EXPECT_EQ(receive_mismatch(op, part, arrival(op, part, bits), bits), "") << bits << " bits, " << bytes;
    }
  }
}

TEST(ReceiveMismatch, AMessageOfAnotherSizeIsNamed) {
  const Op& want = operation(8192, 4096);
  const Op& sent = operation(16384, 4096);
  for (unsigned bits : {64u, 32u})
    EXPECT_THAT(receive_mismatch(want, 0, arrival(sent, 0, bits), bits),
                HasSubstr("receive from rank 3 expected 8192 bytes and got a message of 16384"));
}

// With 32-bit labels, sizes from 16 MiB up share one value; the part sizes still tell them apart.
TEST(ReceiveMismatch, LargeMessagesOfOtherSizesFailWithShortLabels) {
  const Op& want = operation(size_t{48} << 20, 512 << 10);  // 16 parts of 3 MiB
  const Op& sent = operation(size_t{32} << 20, 512 << 10);  // 16 parts of 2 MiB
  ASSERT_EQ(want.parts, 16u);
  ASSERT_EQ(sent.part_bytes, size_t{2} << 20);
  EXPECT_THAT(receive_mismatch(want, 0, arrival(sent, 0, 32), 32),
              HasSubstr("expected 50331648 bytes and got a message whose part 1 has 2097152 bytes"));
  const Op& small = operation(size_t{4} << 20, size_t{1} << 20);  // 4 parts of 1 MiB
  EXPECT_THAT(receive_mismatch(want, 0, arrival(small, 0, 32), 32), HasSubstr("got a message of 4194304"));
  EXPECT_THAT(receive_mismatch(small, 0, arrival(want, 0, 32), 32), HasSubstr("got a message of at least 16777215"));
}

// After a longer message failed a receive, its second half is left on the tag; a receive of that
// half's size must not take it as a whole message.
TEST(ReceiveMismatch, TheBackHalfOfALongerMessageIsNotAMessage) {
  const Op& sent = operation(16384, 4096);  // 4 parts
  const Op& want = operation(8192, 4096);   // 2 parts
  for (unsigned bits : {64u, 32u}) {
    EXPECT_NE(receive_mismatch(want, 0, arrival(sent, 2, bits), bits), "");
    EXPECT_NE(receive_mismatch(want, 1, arrival(sent, 3, bits), bits), "");
  }
  // Same size, out of step: part 2 of another message of this size where part 1 belonged.
  EXPECT_THAT(receive_mismatch(want, 0, arrival(want, 1, 64), 64),
              HasSubstr("got part 2 of 2 of a message of that size as its part 1 of 2: the messages on this tag are "
                        "out of step"));
}

// Without a label (the node transport) the length is all there is.
TEST(ReceiveMismatch, UnlabelledPartsAreJudgedByLength) {
  const Op& want = operation(size_t{40} << 20, 0);
  EXPECT_EQ(receive_mismatch(want, 0, {nullptr, 0, "", want.bytes, std::nullopt}, 32), "");
  EXPECT_THAT(receive_mismatch(want, 0, {nullptr, 0, "", 4000, std::nullopt}, 64),
              HasSubstr("expected 41943040 bytes and got a message of 4000"));
}

}  // namespace
}  // namespace h2::dicomm::detail
