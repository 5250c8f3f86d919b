#include "h2/plugin_comm.hpp"

#include "h2/error.hpp"
#include "plugin_handle.hpp"

namespace h2 {

namespace {

const H2_CollectiveTable& table_of(const Device& device) {
  const detail::PluginHandle& plugin = *device.plugin();
  if (!plugin.has_collectives())
    throw Error(H2_STATUS_UNSUPPORTED, device.label() + ": the plugin offers no collective library (ABI 1.5)");
  return plugin.collectives();
}

}  // namespace

std::optional<CollectiveLibrary> PluginComm::library(const Device& device) {
  const detail::PluginHandle& plugin = *device.plugin();
  if (!plugin.has_collectives()) return std::nullopt;
  const H2_CollectiveTable& table = plugin.collectives();
  return CollectiveLibrary{table.library_name, table.scope == H2_COMM_SCOPE_NODE ? CommScope::node : CommScope::network,
                           table.unique_id_bytes};
}

H2_CommUniqueId PluginComm::unique_id(const Device& device) {
  H2_CommUniqueId id{};
  device.plugin()->check(table_of(device).get_unique_id(&id), "get_unique_id");
  return id;
}

PluginComm::PluginComm(const Device& device, const H2_CommUniqueId& id, int ranks, int rank,
                       std::chrono::milliseconds timeout)
    : device_(device), size_(ranks), rank_(rank) {
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw Error(H2_STATUS_INVALID_ARGUMENT, device.label() + ": rank " + std::to_string(rank) + " of a " +
                                                std::to_string(ranks) + "-rank communicator");
  const auto ms = static_cast<uint32_t>(std::min<int64_t>(timeout.count(), UINT32_MAX));
  device.plugin()->check(table_of(device).comm_init_rank(device.index(), &id, ranks, rank, ms, &comm_),
                         "comm_init_rank(rank " + std::to_string(rank) + " of " + std::to_string(ranks) + ")");
}

PluginComm::~PluginComm() {
  if (comm_ != nullptr) table().comm_destroy(comm_);
}

const H2_CollectiveTable& PluginComm::table() const {
  return device_.plugin()->collectives();
}

void PluginComm::check_tensor(const Tensor& tensor, const char* call, const char* role) const {
  if (!tensor.defined() || !(tensor.device() == device_) || !tensor.is_contiguous())
    throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": " + role + " " +
                                                (tensor.defined() ? tensor.describe() : std::string("(undefined)")) +
                                                " is not a contiguous tensor of " + device_.label());
}

namespace {

// Throws unless `a` and `b` hold one dtype and `b` has `times` x `a`'s elements.
void check_sizes(const char* call, const Tensor& a, const char* a_role, const Tensor& b, const char* b_role,
                 int64_t times) {
  if (a.dtype() != b.dtype() || b.numel() != a.numel() * times)
    throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(call) + ": " + b_role + " " + b.describe() + " must have " +
                                                (times == 1 ? "the" : std::to_string(times) + " x the") +
                                                " elements and the dtype of " + a_role + " " + a.describe());
}

}  // namespace

void PluginComm::allreduce(Stream& stream, const Tensor& send, const Tensor& recv, H2_ReduceOp op) const {
  check_tensor(send, "allreduce", "send");
  check_tensor(recv, "allreduce", "recv");
  check_sizes("allreduce", send, "send", recv, "recv", 1);
  device_.plugin()->check(table().allreduce(comm_, send.data(), recv.data(), static_cast<uint64_t>(send.numel()),
                                            static_cast<uint32_t>(send.dtype()), op, stream.native()),
                          "allreduce");
}

void PluginComm::reduce_scatter(Stream& stream, const Tensor& send, const Tensor& recv, H2_ReduceOp op) const {
  check_tensor(send, "reduce_scatter", "send");
  check_tensor(recv, "reduce_scatter", "recv");
  check_sizes("reduce_scatter", recv, "recv", send, "send", size_);
  device_.plugin()->check(table().reduce_scatter(comm_, send.data(), recv.data(), static_cast<uint64_t>(recv.numel()),
                                                 static_cast<uint32_t>(recv.dtype()), op, stream.native()),
                          "reduce_scatter");
}

void PluginComm::allgather(Stream& stream, const Tensor& send, const Tensor& recv) const {
  check_tensor(send, "allgather", "send");
  check_tensor(recv, "allgather", "recv");
  check_sizes("allgather", send, "send", recv, "recv", size_);
  device_.plugin()->check(table().allgather(comm_, send.data(), recv.data(), static_cast<uint64_t>(send.numel()),
                                            static_cast<uint32_t>(send.dtype()), stream.native()),
                          "allgather");
}

void PluginComm::broadcast(Stream& stream, const Tensor& send, const Tensor& recv, int root) const {
  check_tensor(recv, "broadcast", "recv");
  if (root < 0 || root >= size_)
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "broadcast: root " + std::to_string(root) + " of " + std::to_string(size_) + " ranks");
  if (rank_ == root) {
    check_tensor(send, "broadcast", "send");
    check_sizes("broadcast", send, "send", recv, "recv", 1);
  }
  device_.plugin()->check(
      table().broadcast(comm_, rank_ == root ? send.data() : nullptr, recv.data(), static_cast<uint64_t>(recv.numel()),
                        static_cast<uint32_t>(recv.dtype()), root, stream.native()),
      "broadcast");
}

void PluginComm::send(Stream& stream, const Tensor& tensor, int peer) const {
  check_tensor(tensor, "send", "tensor");
  device_.plugin()->check(table().send(comm_, tensor.data(), static_cast<uint64_t>(tensor.numel()),
                                       static_cast<uint32_t>(tensor.dtype()), peer, stream.native()),
                          "send to rank " + std::to_string(peer));
}

void PluginComm::recv(Stream& stream, const Tensor& tensor, int peer) const {
  check_tensor(tensor, "recv", "tensor");
  device_.plugin()->check(table().recv(comm_, tensor.data(), static_cast<uint64_t>(tensor.numel()),
                                       static_cast<uint32_t>(tensor.dtype()), peer, stream.native()),
                          "recv from rank " + std::to_string(peer));
}

void PluginComm::group_start() const {
  device_.plugin()->check(table().group_start(), "group_start");
}
void PluginComm::group_end() const {
  device_.plugin()->check(table().group_end(), "group_end");
}

void PluginComm::abort(const std::string& reason) const noexcept {
  if (comm_ != nullptr) table().comm_abort(comm_, reason.c_str());
}

}  // namespace h2
