#include "vendor_path.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "h2/log.hpp"
#include "hex.hpp"

namespace h2::dicomm::detail {

using namespace std::chrono_literals;

namespace {

using json = nlohmann::json;

// What each member can say of its device; the reason none is used, or "" when the library serves all.
std::string why_not(const std::vector<json>& members) {
  const json& first = members[0];
  for (size_t r = 0; r < members.size(); ++r) {
    const json& m = members[r];
    if (m["library"].get<std::string>().empty())
      return "rank " + std::to_string(r) + "'s plugin " + m["plugin"].get<std::string>() + " has no collective library";
    if (m["plugin"] != first["plugin"] || m["library"] != first["library"])
      return "rank " + std::to_string(r) + " runs " + m["library"].get<std::string>() + " of " +
             m["plugin"].get<std::string>() + ", rank 0 " + first["library"].get<std::string>() + " of " +
             first["plugin"].get<std::string>();
    if (m["scope"] == "node" && m["node"] != first["node"])
      return first["library"].get<std::string>() + " joins the ranks of one node only, and rank " + std::to_string(r) +
             " is on another node than rank 0";
  }
  return "";
}

}  // namespace

PluginComm* vendor_comm(CommState& s, const Device& device) {
  World& world = *s.world;
  if (!world.vendor_collectives() || s.members.size() < 2) return nullptr;
  // Work already on the library's streams fails through its abort; what comes after a failure of
  // the job is refused here, as DiComm's own collectives refuse it.
  world.engine().throw_if_failed();
  if (s.vendor) {
    if (!(s.vendor->device == device))
      throw CommError(CommErrorKind::usage, -1,
                      "DiComm: communicator '" + s.name + "' runs its collectives on " + s.vendor->device.label() +
                          " on this rank; a collective on " + device.label() +
                          " would not meet the other ranks' (use one device per rank and communicator)");
    return s.vendor->comm.get();
  }
  s.vendor = std::make_shared<VendorPath>(VendorPath{device, nullptr, ""});
  const std::optional<CollectiveLibrary> library = PluginComm::library(device);
  Store& store = *world.store();
  const std::string prefix = "dicomm/vendor/" + std::to_string(s.id) + "/";
  store.set(prefix + std::to_string(s.rank),
            json{{"plugin", device.plugin_name()},
                 {"library", library ? library->name : ""},
                 {"scope", library && library->scope == CommScope::network ? "network" : "node"},
                 {"node", world.node()}}
                .dump());
  std::vector<json> members;
  for (size_t r = 0; r < s.members.size(); ++r) members.push_back(json::parse(store.get(prefix + std::to_string(r))));
  s.vendor->why_not = why_not(members);
  if (!s.vendor->why_not.empty()) {
    log(LogLevel::info, "dicomm", "communicator '" + s.name + "': DiComm's own collectives: " + s.vendor->why_not);
    return nullptr;
  }
  H2_CommUniqueId id{};
  if (s.rank == 0) {
    id = PluginComm::unique_id(device);
    store.set(prefix + "id", hex(id.bytes));
  } else {
    const std::vector<uint8_t> bytes = unhex(store.get(prefix + "id"));
    if (bytes.size() != sizeof id.bytes)
      throw CommError(CommErrorKind::usage, 0,
                      "DiComm: the store holds no plugin library id for communicator '" + s.name + "' (" +
                          std::to_string(bytes.size()) + " bytes)");
    std::copy(bytes.begin(), bytes.end(), id.bytes);
  }
  s.vendor->comm =
      std::make_shared<PluginComm>(device, id, static_cast<int>(s.members.size()), s.rank, world.engine().timeout());
  world.remember_vendor_comm(s.vendor->comm);
  log(LogLevel::info, "dicomm", "communicator '" + s.name + "': collectives on " + library->name);
  return s.vendor->comm.get();
}

void run_on_library(CommState& s, PluginComm& comm, Stream& stream, const std::string& what,
                    const std::function<void()>& call) {
  Engine& engine = s.world->engine();
  const std::string described = what + " on communicator '" + s.name + "' (" + comm.library_name() + ")";
  call();
  Event done = stream.device().create_event(false);
  done.record(stream);
  const auto start = std::chrono::steady_clock::now();
  auto pause = std::chrono::microseconds(20);
  while (!done.ready()) {
    if (engine.failed()) {
      comm.abort("DiComm: the job failed");
      engine.throw_if_failed();
    }
    if (std::chrono::steady_clock::now() - start > engine.timeout()) {
      comm.abort("DiComm: " + described + " timed out");
      throw CommError(CommErrorKind::timeout, -1,
                      "DiComm: " + described + " did not finish within " +
                          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(engine.timeout()).count()) +
                          " s (H2_DICOMM_TIMEOUT)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
  try {
    stream.synchronize();  // the work has run: this only collects its error
  } catch (const Error& e) {
    // A peer that died is seen by the library and by the store at about the same time; the store's
    // verdict names the rank.
    const auto grace = std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(engine.timeout(), 1s);
    while (!engine.failed() && std::chrono::steady_clock::now() < grace) std::this_thread::sleep_for(1ms);
    engine.throw_if_failed();
    throw CommError(CommErrorKind::transport, -1, "DiComm: " + described + " failed: " + e.what());
  }
}

}  // namespace h2::dicomm::detail
