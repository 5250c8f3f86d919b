#include "vendor_path.hpp"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/hex.hpp"
#include "common/rank_list.hpp"
#include "h2/log.hpp"

namespace h2::dicomm::detail {

using namespace std::chrono_literals;

namespace {

using json = nlohmann::json;

// Why some member's device has no library, or "".
std::string missing_library(const std::vector<json>& members) {
  for (size_t r = 0; r < members.size(); ++r)
    if (members[r]["library"].get<std::string>().empty())
      return "rank " + std::to_string(r) + "'s plugin " + members[r]["plugin"].get<std::string>() +
             " has no collective library";
  return "";
}

// The group a member's library can join it with: one plugin's library, on one node where the library
// reaches no further.
std::string group_key(const json& member) {
  return member["plugin"].get<std::string>() + "|" + member["library"].get<std::string>() + "|" +
         (member["scope"] == "node" ? member["node"].get<std::string>() : "");
}

// Member `s.rank`'s part of a library communicator over `ranks` (communicator ranks, the first makes
// the id), named `key` in the store.
std::shared_ptr<PluginComm> join_library(CommState& s, const Device& device, const std::vector<int>& ranks,
                                         const std::string& key) {
  World& world = *s.world;
  Store& store = *world.store();
  const auto me = std::find(ranks.begin(), ranks.end(), s.rank) - ranks.begin();
  // Only the bytes the library's ids use travel (128 for NCCL, 4,108 for HCCL, of the 4,352 the type holds).
  const size_t used = PluginComm::library(device).value().unique_id_bytes;
  H2_CommUniqueId id{};
  if (me == 0) {
    id = PluginComm::unique_id(device);
    store.set(key, hex(std::span<const uint8_t>(id.bytes, used)));
  } else {
    const std::vector<uint8_t> bytes = unhex(store.get(key));
    if (bytes.size() != used)
      throw CommError(CommErrorKind::usage, ranks[0],
                      "DiComm: the store holds no plugin library id for communicator '" + s.name + "' (" +
                          std::to_string(bytes.size()) + " bytes)");
    std::copy(bytes.begin(), bytes.end(), id.bytes);
  }
  auto comm = std::make_shared<PluginComm>(device, id, static_cast<int>(ranks.size()), static_cast<int>(me),
                                           world.engine().timeout());
  world.remember_vendor_comm(comm);
  return comm;
}

}  // namespace

// Fills `path` for communicator `s` on `device`, joining the libraries it uses. Collective.
void decide(CommState& s, const Device& device, VendorPath& path);

VendorPath* library_path(CommState& s, const Device& device) {
  World& world = *s.world;
  if (!world.vendor_collectives() || s.members.size() < 2) return nullptr;
  // Work already on the library's streams fails through its abort; what comes after a failure of
  // the job is refused here, as DiComm's own collectives refuse it.
  world.engine().throw_if_failed();
  if (s.vendor) {
    if (!s.vendor->failure.empty())
      throw CommError(
          CommErrorKind::transport, -1,
          "DiComm: communicator '" + s.name + "' could not join its plugin's collective library: " + s.vendor->failure);
    if (!s.vendor->why_not.empty()) return nullptr;  // DiComm's own collectives, on any device
    if (!(s.vendor->device == device))
      throw CommError(CommErrorKind::usage, -1,
                      "DiComm: communicator '" + s.name + "' runs its collectives on " + s.vendor->device.label() +
                          " on this rank; a collective on " + device.label() +
                          " would not meet the other ranks' (use one device per rank and communicator)");
    return s.vendor.get();
  }
  // Decided in full or not at all: a decision that failed half-way (a store timeout, a library that
  // could not join) leaves every later collective of the communicator refused, never a path that
  // skips steps.
  auto decided = std::make_shared<VendorPath>(device);
  try {
    decide(s, device, *decided);
  } catch (const std::exception& e) {
    decided->failure = e.what();
    s.vendor = decided;
    throw;
  }
  s.vendor = decided;
  return s.vendor->why_not.empty() ? s.vendor.get() : nullptr;
}

void decide(CommState& s, const Device& device, VendorPath& path) {
  World& world = *s.world;
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
  path.why_not = missing_library(members);
  if (!path.why_not.empty()) {
    log(LogLevel::info, "dicomm", "communicator '" + s.name + "': DiComm's own collectives: " + path.why_not);
    return;
  }
  // Groups in order of their first member, each member's place in its group.
  std::vector<std::string> keys;
  std::vector<std::vector<int>> groups;
  for (size_t r = 0; r < members.size(); ++r) {
    const std::string key = group_key(members[r]);
    const auto found = std::find(keys.begin(), keys.end(), key) - keys.begin();
    if (found == static_cast<long>(keys.size())) {
      keys.push_back(key);
      groups.emplace_back();
    }
    groups[static_cast<size_t>(found)].push_back(static_cast<int>(r));
  }
  if (groups.size() == 1) {
    path.comm = join_library(s, device, groups[0], prefix + "id");
    log(LogLevel::info, "dicomm", "communicator '" + s.name + "': collectives on " + library->name);
    return;
  }
  if (std::all_of(groups.begin(), groups.end(), [](const auto& group) { return group.size() == 1; })) {
    // Nothing to run inside: the groups' libraries would add only steps.
    path.why_not = "every rank's library group holds that rank alone";
    log(LogLevel::info, "dicomm", "communicator '" + s.name + "': DiComm's own collectives: " + path.why_not);
    return;
  }
  // Several groups: the library inside each, DiComm between them.
  Hierarchy h = hierarchy_of(groups, s.rank);
  if (h.place.size > 1)
    h.library = join_library(s, device, groups[h.place.group], prefix + "group/" + std::to_string(h.place.group));
  join_across(s, device, h, prefix);
  log(LogLevel::info, "dicomm",
      "communicator '" + s.name + "': collectives hierarchical over " + std::to_string(groups.size()) +
          " groups (the plugins' libraries inside, DiComm between, " + h.between() +
          "); this rank's group: " + (h.place.size > 1 ? library->name : std::string("itself alone")) + " on ranks " +
          rank_list(groups[h.place.group]));
  path.hierarchy = std::move(h);
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
