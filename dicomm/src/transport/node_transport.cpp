#include "node_transport.hpp"

#include <fcntl.h>
#include <rdma/fi_errno.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <sstream>

#include "common/errno_text.hpp"
#include "common/unique_name.hpp"
#include "h2/error.hpp"

namespace h2::dicomm::detail {

namespace {

constexpr uint64_t kMagic = 0x6832'6e6f'6465'0002;  // "h2node", layout version 2
constexpr uint64_t kDepth = 64;                     // commands in flight from one rank to another
constexpr size_t kInline = 840;                     // messages this small travel inside the command

struct Command {
  uint64_t tag;
  uint64_t bytes;
  uint64_t address;  // in the sender's address space; 0 when inline
  uint64_t send_id;  // what the receiver acknowledges; 0 when inline (complete once posted)
  uint64_t shared;   // 1: the data also lies at `shared_offset` of the exported region `handle`
  uint64_t shared_offset;
  H2_MemHandle handle;
  char data[kInline];
};
static_assert(sizeof(Command) == 1016, "keep a command within 1 KiB");

struct Ack {
  uint64_t send_id;
  int64_t error;  // 0, or a positive FI_E* code
};

// One producer, one consumer, in shared memory.
template <typename Slot>
struct Ring {
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "rings in shared memory need lock-free atomics");
  alignas(64) std::atomic<uint64_t> head{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the consumer
  Slot slots[kDepth];

  // The producer's next slot, or nullptr when the ring is full; publish it with push().
  Slot* reserve() {
    const uint64_t h = head.load(std::memory_order_relaxed);
    return h - tail.load(std::memory_order_acquire) >= kDepth ? nullptr : &slots[h % kDepth];
  }
  void push() { head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // The consumer's oldest slot, or nullptr when empty; release it with pop().
  const Slot* front() const {
    const uint64_t t = tail.load(std::memory_order_relaxed);
    return t == head.load(std::memory_order_acquire) ? nullptr : &slots[t % kDepth];
  }
  void pop() { tail.store(tail.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
};

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

}  // namespace

// A rank's segment: this header, then one command ring per local rank (commands from that rank to
// this one), then one ack ring per local rank (that rank's acknowledgements of this one's sends).
struct NodeTransport::Segment {
  uint64_t magic;
  int64_t pid;
  uint64_t local_count;
  uint64_t probe;  // a random value peers read with process_vm_readv to check they may

  static size_t header_bytes() { return round_up(sizeof(Segment), 64); }
  static size_t bytes(size_t local_count) {
    return header_bytes() + local_count * (sizeof(Ring<Command>) + sizeof(Ring<Ack>));
  }
  Ring<Command>* commands(size_t from) {
    return reinterpret_cast<Ring<Command>*>(reinterpret_cast<char*>(this) + header_bytes()) + from;
  }
  Ring<Ack>* acks(size_t from) {
    return reinterpret_cast<Ring<Ack>*>(reinterpret_cast<char*>(commands(0)) + local_count * sizeof(Ring<Command>)) +
           from;
  }
};

struct NodeTransport::Peer {
  int world_rank = -1;
  pid_t pid = 0;
  bool enabled = false;
  Segment* segment = nullptr;  // the peer's, mapped here
  size_t segment_bytes = 0;
  Ring<Command>* outbox = nullptr;  // in the peer's segment: this rank's commands to it
  Ring<Ack>* acks_out = nullptr;    // in the peer's segment: this rank's acknowledgements of its sends
  Ring<Command>* inbox = nullptr;   // in this rank's segment: its commands to this rank
  Ring<Ack>* acks_in = nullptr;     // in this rank's segment: its acknowledgements of this rank's sends
  uint64_t outstanding = 0;         // this rank's copied-by-the-peer sends not yet acknowledged
  std::deque<Posted> posted;
  std::deque<Arrived> unexpected;
  std::deque<Ack> acks_waiting;  // for a full ack ring (cannot happen while outstanding <= kDepth)
};

NodeTransport::NodeTransport(int world_rank, std::vector<int> local) : rank_(world_rank), local_(std::move(local)) {
  const auto me = std::find(local_.begin(), local_.end(), rank_);
  if (me == local_.end())
    throw Error(H2_STATUS_INTERNAL, "DiComm node transport: this rank is not among the local ones");
  index_ = static_cast<int>(me - local_.begin());
  // Where Yama restricts ptrace to descendants, a peer may read this process only if it says so.
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);

  const UniqueName unique = unique_name("/h2-dicomm-");
  name_ = unique.name;
  const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw Error(H2_STATUS_INTERNAL, "DiComm node transport: shm_open(" + name_ + "): " + errno_text(errno));
  segment_bytes_ = Segment::bytes(local_.size());
  void* memory = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(segment_bytes_)) == 0)
    memory = mmap(nullptr, segment_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (memory == MAP_FAILED) {
    shm_unlink(name_.c_str());
    throw Error(H2_STATUS_INTERNAL, "DiComm node transport: mapping " + std::to_string(segment_bytes_) +
                                        " bytes of shared memory (" + name_ + "): " + errno_text(error));
  }
  segment_ = static_cast<Segment*>(memory);
  segment_->magic = kMagic;
  segment_->pid = getpid();
  segment_->local_count = local_.size();
  segment_->probe = unique.nonce | 1;
  for (size_t i = 0; i < local_.size(); ++i) {
    new (segment_->commands(i)) Ring<Command>();
    new (segment_->acks(i)) Ring<Ack>();
  }
  peers_.resize(local_.size());
}

NodeTransport::~NodeTransport() {
  for (auto& p : peers_)
    if (p && p->segment != nullptr) munmap(p->segment, p->segment_bytes);
  if (segment_ != nullptr) munmap(segment_, segment_bytes_);
  unlink();
}

std::string NodeTransport::address() const {
  std::ostringstream text;
  text << name_ << " " << getpid() << " " << reinterpret_cast<uintptr_t>(segment_);
  return text.str();
}

bool NodeTransport::connect(int world_rank, const std::string& address, std::string& why) {
  const auto at = std::find(local_.begin(), local_.end(), world_rank);
  if (at == local_.end() || world_rank == rank_) {
    why = "rank " + std::to_string(world_rank) + " is not another rank of this node";
    return false;
  }
  std::istringstream text(address);
  std::string name;
  int64_t pid = 0;
  uintptr_t base = 0;
  if (!(text >> name >> pid >> base)) {
    why = "rank " + std::to_string(world_rank) + " published a malformed address '" + address + "'";
    return false;
  }
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    why = "shm_open(" + name + ") of rank " + std::to_string(world_rank) + ": " + errno_text(errno);
    return false;
  }
  struct stat info {};
  void* memory = MAP_FAILED;
  if (fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) == Segment::bytes(local_.size()))
    memory = mmap(nullptr, static_cast<size_t>(info.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) {
    why = "mapping rank " + std::to_string(world_rank) + "'s segment " + name + " failed";
    return false;
  }
  auto peer = std::make_unique<Peer>();
  peer->world_rank = world_rank;
  peer->pid = static_cast<pid_t>(pid);
  peer->segment = static_cast<Segment*>(memory);
  peer->segment_bytes = static_cast<size_t>(info.st_size);
  const auto index = static_cast<size_t>(at - local_.begin());
  peer->outbox = peer->segment->commands(static_cast<size_t>(index_));
  peer->acks_out = peer->segment->acks(static_cast<size_t>(index_));
  peer->inbox = segment_->commands(index);
  peer->acks_in = segment_->acks(index);
  const bool valid = peer->segment->magic == kMagic && peer->segment->pid == pid;
  // The check that matters: may this process read the peer's memory (ptrace rules, containers)?
  uint64_t probe = 0;
  iovec local{&probe, sizeof probe};
  iovec remote{reinterpret_cast<void*>(base + offsetof(Segment, probe)), sizeof probe};
  const ssize_t read = valid ? process_vm_readv(peer->pid, &local, 1, &remote, 1, 0) : -1;
  const int error = errno;
  const bool readable = read == static_cast<ssize_t>(sizeof probe) && probe == peer->segment->probe;
  peers_[index] = std::move(peer);
  if (!valid) why = "rank " + std::to_string(world_rank) + "'s segment " + name + " is not a DiComm segment";
  if (valid && !readable)
    why = "this process may not read rank " + std::to_string(world_rank) +
          "'s memory (process_vm_readv: " + (read < 0 ? errno_text(error) : "read a different value") + ")";
  return valid && readable;
}

void NodeTransport::enable(int world_rank) {
  peer(world_rank).enabled = true;
}

bool NodeTransport::enabled(int world_rank) const {
  const auto at = std::find(local_.begin(), local_.end(), world_rank);
  if (at == local_.end()) return false;
  const auto& p = peers_[static_cast<size_t>(at - local_.begin())];
  return p && p->enabled;
}

void NodeTransport::unlink() {
  if (!unlinked_) shm_unlink(name_.c_str());
  unlinked_ = true;
}

NodeTransport::Peer& NodeTransport::peer(int world_rank) {
  const auto at = std::find(local_.begin(), local_.end(), world_rank);
  if (at == local_.end() || !peers_[static_cast<size_t>(at - local_.begin())])
    throw Error(H2_STATUS_INTERNAL, "DiComm node transport: rank " + std::to_string(world_rank) + " is not connected");
  return *peers_[static_cast<size_t>(at - local_.begin())];
}

ssize_t NodeTransport::post_send(int world_rank, const void* data, size_t bytes, uint64_t tag, void* context,
                                 const MemoryExport* shared) {
  Peer& p = peer(world_rank);
  const bool small = bytes <= kInline;
  // Acknowledgements must always fit their ring: at most kDepth sends wait for one.
  if (!small && p.outstanding >= kDepth) return -FI_EAGAIN;
  Command* command = p.outbox->reserve();
  if (command == nullptr) return -FI_EAGAIN;
  command->tag = tag;
  command->bytes = bytes;
  if (small) {
    if (bytes > 0) std::memcpy(command->data, data, bytes);
    command->address = 0;
    command->send_id = 0;
    done_.push_back({context, 0, "", 0});
  } else {
    // The receiver copies straight from `data`; the send completes when it says it has.
    command->address = reinterpret_cast<uintptr_t>(data);
    command->shared = shared != nullptr ? 1 : 0;
    if (shared != nullptr) {
      command->shared_offset = shared->offset;
      command->handle = shared->handle;
    }
    command->send_id = next_send_id_++;
    sends_.emplace(command->send_id, context);
    ++p.outstanding;
  }
  p.outbox->push();
  return 0;
}

ssize_t NodeTransport::post_recv(int world_rank, void* data, size_t bytes, uint64_t tag, void* context) {
  Peer& p = peer(world_rank);
  const Posted recv{data, bytes, tag, context};
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    if (it->tag != tag) continue;
    const Arrived message = std::move(*it);
    p.unexpected.erase(it);
    deliver(p, message, recv, done_);
    return 0;
  }
  p.posted.push_back(recv);
  return 0;
}

void NodeTransport::deliver(Peer& from, const Arrived& message, const Posted& recv, std::vector<Completion>& out) {
  int error = 0;
  std::string text;
  if (message.bytes > recv.bytes) {
    error = FI_ETRUNC;
    text = "a message of " + std::to_string(message.bytes) + " bytes from rank " + std::to_string(from.world_rank) +
           " for a receive of " + std::to_string(recv.bytes) + " bytes";
  } else if (message.is_inline) {
    if (message.bytes > 0) std::memcpy(recv.data, message.inline_data.data(), message.bytes);
  } else if (const std::span<const char> region =
                 message.shared && opener_ ? opener_(from.world_rank, message.handle) : std::span<const char>();
             !region.empty() && message.shared_offset <= region.size() &&
             message.bytes <= region.size() - message.shared_offset) {
    // The sender's device memory is mapped here: a plain copy, with no page pinning per message.
    // (A region that cannot be opened is empty, and a range outside it, which a well-formed peer
    // never sends, is read from the sender's address space below.)
    std::memcpy(recv.data, region.data() + message.shared_offset, message.bytes);
  } else {
    size_t done = 0;
    while (done < message.bytes) {
      iovec local{static_cast<char*>(recv.data) + done, message.bytes - done};
      iovec remote{reinterpret_cast<void*>(message.address + done), message.bytes - done};
      const ssize_t n = process_vm_readv(from.pid, &local, 1, &remote, 1, 0);
      if (n <= 0) {
        error = FI_EIO;
        text = "copying " + std::to_string(message.bytes) + " bytes from rank " + std::to_string(from.world_rank) +
               " (process_vm_readv: " + (n < 0 ? errno_text(errno) : std::string("no progress")) + ")";
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  out.push_back({recv.context, error, text, message.bytes, std::nullopt});
  if (!message.is_inline) acknowledge(from, message.send_id, error);
}

void NodeTransport::acknowledge(Peer& to, uint64_t send_id, int error) {
  to.acks_waiting.push_back({send_id, error});
  flush_acknowledgements(to);
}

void NodeTransport::flush_acknowledgements(Peer& to) {
  while (!to.acks_waiting.empty()) {
    Ack* slot = to.acks_out->reserve();
    if (slot == nullptr) return;  // poll() tries again
    *slot = to.acks_waiting.front();
    to.acks_out->push();
    to.acks_waiting.pop_front();
  }
}

size_t NodeTransport::poll(std::vector<Completion>& out) {
  const size_t before = out.size();
  out.insert(out.end(), done_.begin(), done_.end());
  done_.clear();
  // One copy per poll: the engine then lands what was copied, and the reduction and the send that
  // follow it go out before the next copy. Copying every waiting message first made the peer wait
  // for this rank's send through copies only this rank needed (a 1 MiB allreduce of 2 ranks spent
  // a third of its time so).
  bool copied = false;
  for (auto& owned : peers_) {
    if (!owned || !owned->enabled) continue;
    Peer& p = *owned;
    flush_acknowledgements(p);
    for (const Ack* ack = p.acks_in->front(); ack != nullptr; ack = p.acks_in->front()) {
      const auto it = sends_.find(ack->send_id);
      if (it != sends_.end()) {
        out.push_back({it->second, static_cast<int>(ack->error),
                       ack->error == 0 ? "" : "rank " + std::to_string(p.world_rank) + " could not copy the message",
                       0});
        sends_.erase(it);
        --p.outstanding;
      }
      p.acks_in->pop();
    }
    for (const Command* command = p.inbox->front(); command != nullptr; command = p.inbox->front()) {
      const bool is_inline = command->send_id == 0;  // senders number only what the receiver copies
      if (copied && !is_inline) break;               // the next poll copies it
      Arrived message{command->tag, command->bytes, command->address, command->send_id, {}, is_inline};
      if (command->shared != 0 && !is_inline) {
        message.shared = true;
        message.shared_offset = command->shared_offset;
        message.handle = command->handle;
      }
      if (message.is_inline) message.inline_data.assign(command->data, command->data + command->bytes);
      p.inbox->pop();
      const auto match =
          std::find_if(p.posted.begin(), p.posted.end(), [&](const Posted& r) { return r.tag == message.tag; });
      if (match == p.posted.end()) {
        p.unexpected.push_back(std::move(message));
        continue;
      }
      const Posted recv = *match;
      p.posted.erase(match);
      copied = copied || !message.is_inline;
      deliver(p, message, recv, out);
    }
  }
  return out.size() - before;
}

}  // namespace h2::dicomm::detail
