// The rendezvous store's wire protocol. Internal to DiComm; both ends are built from this file, so
// the version only has to catch a client and a server from different H2 builds.
//
// A message is a frame: u32 payload length, then the payload: u8 type and the type's fields.
// Integers are big-endian; a string is a u32 length and its bytes.
//
//   client -> server                               server -> client
//   hello   magic, version, token, rank,           welcome  ping interval ms (u32)
//           world size, pid, hostname              refused  reason
//   set     id, key, value                         reply    id, ok (u8), text (value, number or error)
//   get     id, key, timeout ms                    failure  rank, reason (pushed, unsolicited)
//   add     id, key, delta                         shutdown reason (rank 0 stopped the store)
//   barrier id, name, timeout ms
//   abort   id, reason                             pong     (the answer to a ping)
//   goodbye id
//   ping    waiting (u8: 0 no, 1 yes, 2 unknown), ms in that state (u64): every heartbeat
//           interval; the server fails a rank it has not heard from for its stall limit, and a
//           client reports rank 0 when it has not heard from the server for as long
//   activity id                                   reply: one line per rank, "RANK CONNECTED
//                                                  WAITING MS_IN_STATE MS_SINCE_PING" (WAITING as ping's)
//
// Before its welcome a connection may send one hello of at most kMaxHelloBytes, within
// kHelloDeadline; the server holds at most kMaxUnwelcomed such connections (the oldest goes first).
//
// Requests carry an id chosen by the client, so several threads share one connection and match
// replies by id; get and barrier may be answered long after later requests.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

namespace h2::dicomm::detail {

inline constexpr uint32_t kStoreMagic = 0x48325354;   // "H2ST"
inline constexpr uint16_t kStoreProtocolVersion = 3;  // 2: ping and pong; 3: wait states, activity
// Fabric addresses and ids are small; a frame beyond this is garbage or a peer that is not ours.
inline constexpr uint32_t kMaxFrameBytes = 64u << 20;
// A hello is a token, a host name and a few integers: more before the welcome is not one of ours, and
// buffering up to kMaxFrameBytes for strangers let four connections grow rank 0 by 270 MB.
inline constexpr uint32_t kMaxHelloBytes = 4096;
inline constexpr std::chrono::milliseconds kHelloDeadline{10000};
inline constexpr size_t kMaxUnwelcomed = 64;

// How often a client pings for a stall limit (the DiComm timeout): 20 pings per limit, within reason.
inline std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds stall_limit) {
  return std::clamp(stall_limit / 20, std::chrono::milliseconds(20), std::chrono::milliseconds(5000));
}

enum class MessageType : uint8_t {
  hello = 1,
  set = 2,
  get = 3,
  add = 4,
  barrier = 5,
  abort = 6,
  goodbye = 7,
  ping = 8,
  activity = 9,
  welcome = 64,
  refused = 65,
  reply = 66,
  failure = 67,
  shutdown = 68,
  pong = 69,
};

class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds one frame.
class FrameWriter {
 public:
  explicit FrameWriter(MessageType type) : bytes_(4, '\0') { u8(static_cast<uint8_t>(type)); }

  FrameWriter& u8(uint8_t v) {
    bytes_.push_back(static_cast<char>(v));
    return *this;
  }
  FrameWriter& u16(uint16_t v) { return big_endian(v, 2); }
  FrameWriter& u32(uint32_t v) { return big_endian(v, 4); }
  FrameWriter& u64(uint64_t v) { return big_endian(v, 8); }
  FrameWriter& i32(int32_t v) { return u32(static_cast<uint32_t>(v)); }
  FrameWriter& i64(int64_t v) { return u64(static_cast<uint64_t>(v)); }
  FrameWriter& str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.append(s);
    return *this;
  }

  // The frame with its length prefix filled in.
  const std::string& finish() {
    uint32_t length = static_cast<uint32_t>(bytes_.size() - 4);
    for (int i = 0; i < 4; ++i) bytes_[static_cast<size_t>(i)] = static_cast<char>(length >> (24 - 8 * i));
    return bytes_;
  }

 private:
  FrameWriter& big_endian(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  std::string bytes_;
};

// Reads the fields of one frame's payload; throws ProtocolError when it runs short.
class FrameReader {
 public:
  explicit FrameReader(std::string_view payload) : data_(payload) {}

  MessageType type() { return static_cast<MessageType>(u8()); }
  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint16_t u16() { return static_cast<uint16_t>(big_endian(2)); }
  uint32_t u32() { return static_cast<uint32_t>(big_endian(4)); }
  uint64_t u64() { return big_endian(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    uint32_t length = u32();
    return std::string(take(length));
  }

 private:
  std::string_view take(size_t n) {
    if (data_.size() < n) throw ProtocolError("truncated message");
    std::string_view out = data_.substr(0, n);
    data_.remove_prefix(n);
    return out;
  }
  uint64_t big_endian(int bytes) {
    std::string_view b = take(static_cast<size_t>(bytes));
    uint64_t v = 0;
    for (char c : b) v = (v << 8) | static_cast<uint8_t>(c);
    return v;
  }
  std::string_view data_;
};

inline uint32_t frame_length(const char* prefix) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(prefix[i]);
  return v;
}

}  // namespace h2::dicomm::detail
