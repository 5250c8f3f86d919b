// Plugins are opened with Boost.DLL (RTLD_NOW | RTLD_LOCAL, so a plugin's symbols never leak into
// the next plugin's and unresolved symbols fail at load, not at first call).
#include "plugin_loader.hpp"

#include <dlfcn.h>

#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "abi_compat.hpp"
#include "h2/log.hpp"
#include "plugin_search.hpp"

namespace h2::detail {

namespace fs = std::filesystem;

namespace {

bool has_elf_header(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  char magic[4] = {};
  file.read(magic, sizeof magic);
  return file.gcount() == 4 && std::memcmp(magic,
                                           "\x7f"
                                           "ELF",
                                           4) == 0;
}

// Boost.DLL reports a failed dlopen as a generic error code; the loader's own explanation (which
// library is missing, which symbol is undefined) is what a person needs, so ask dlopen directly.
std::string loader_message(const fs::path& path, const std::string& fallback) {
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    dlclose(handle);
    return fallback;
  }
  const char* message = dlerror();
  return message != nullptr ? message : fallback;
}

PluginState classify_load_failure(const fs::path& path, const std::string& message) {
  // "cannot open shared object file" about another file means a dependency is missing.
  if (message.find("cannot open shared object file") != std::string::npos &&
      message.find(path.string()) == std::string::npos)
    return PluginState::load_failed;
  if (message.find("invalid ELF header") != std::string::npos || message.find("file too short") != std::string::npos ||
      message.find("wrong ELF class") != std::string::npos ||
      message.find("only ET_DYN and ET_EXEC can be loaded") != std::string::npos)
    return PluginState::not_a_library;
  return PluginState::load_failed;
}

LoadedPlugin failure(PluginInfo info, PluginState state, const std::string& detail) {
  info.state = state;
  info.message = state_message(state, detail);
  return {std::move(info), nullptr, {}};
}

// Required slots of ABI 1.0: everything not marked [optional] in plugin_abi.h.
const char* missing_required_slot(const H2_PluginApi& api) {
#define H2_REQUIRE_SLOT(slot) \
  if (api.slot == nullptr) return #slot;
  H2_REQUIRE_SLOT(initialize)
  H2_REQUIRE_SLOT(shutdown)
  H2_REQUIRE_SLOT(last_error)
  H2_REQUIRE_SLOT(device_count)
  H2_REQUIRE_SLOT(device_properties)
  H2_REQUIRE_SLOT(mem_alloc)
  H2_REQUIRE_SLOT(mem_free)
  H2_REQUIRE_SLOT(stream_create)
  H2_REQUIRE_SLOT(stream_destroy)
  H2_REQUIRE_SLOT(stream_synchronize)
  H2_REQUIRE_SLOT(stream_query)
  H2_REQUIRE_SLOT(stream_wait_event)
  H2_REQUIRE_SLOT(memset_async)
  H2_REQUIRE_SLOT(memcpy_async)
  H2_REQUIRE_SLOT(event_create)
  H2_REQUIRE_SLOT(event_destroy)
  H2_REQUIRE_SLOT(event_record)
  H2_REQUIRE_SLOT(event_query)
  H2_REQUIRE_SLOT(event_synchronize)
#undef H2_REQUIRE_SLOT
  return nullptr;
}

// Why a plugin's collective table cannot be used, or "".
std::string collective_table_fault(const H2_CollectiveTable& table) {
  if (table.struct_size < H2_COLLECTIVE_TABLE_SIZE_1_5)
    return "collective_table struct_size " + std::to_string(table.struct_size) + " is smaller than the " +
           std::to_string(H2_COLLECTIVE_TABLE_SIZE_1_5) + " bytes ABI 1.5 requires";
  if (table.library_name == nullptr || *table.library_name == '\0')
    return "collective_table's library_name is NULL or empty";
  if (table.scope != H2_COMM_SCOPE_NODE && table.scope != H2_COMM_SCOPE_NETWORK)
    return "collective_table's scope " + std::to_string(table.scope) + " is not an H2_CommScope";
  if (table.unique_id_bytes > H2_COMM_UNIQUE_ID_BYTES)
    return "collective_table's unique_id_bytes " + std::to_string(table.unique_id_bytes) + " is more than the " +
           std::to_string(H2_COMM_UNIQUE_ID_BYTES) + " an H2_CommUniqueId holds";
#define H2_REQUIRE_COLLECTIVE_SLOT(slot) \
  if (table.slot == nullptr) return "collective_table's slot '" #slot "' is NULL (every slot is required)";
  H2_REQUIRE_COLLECTIVE_SLOT(get_unique_id)
  H2_REQUIRE_COLLECTIVE_SLOT(comm_init_rank)
  H2_REQUIRE_COLLECTIVE_SLOT(comm_destroy)
  H2_REQUIRE_COLLECTIVE_SLOT(comm_abort)
  H2_REQUIRE_COLLECTIVE_SLOT(allreduce)
  H2_REQUIRE_COLLECTIVE_SLOT(reduce_scatter)
  H2_REQUIRE_COLLECTIVE_SLOT(allgather)
  H2_REQUIRE_COLLECTIVE_SLOT(broadcast)
  H2_REQUIRE_COLLECTIVE_SLOT(send)
  H2_REQUIRE_COLLECTIVE_SLOT(recv)
  H2_REQUIRE_COLLECTIVE_SLOT(group_start)
  H2_REQUIRE_COLLECTIVE_SLOT(group_end)
#undef H2_REQUIRE_COLLECTIVE_SLOT
  return "";
}

// The options `all` holds for the plugin named `name` (none when it holds no entry).
const PluginOptions& options_for(const std::string& name, const std::map<std::string, PluginOptions>& all) {
  static const PluginOptions none;
  const auto found = all.find(name);
  return found != all.end() ? found->second : none;
}

// "memory, threads": the keys of `options`.
std::string key_list(const PluginOptions& options) {
  std::string keys;
  for (const auto& entry : options) keys += (keys.empty() ? "" : ", ") + entry.first;
  return keys;
}

// Why `options` cannot be passed to the plugin `info` describes; "" when they can. A plugin of an
// older minor has no field to read them from, and dropping them would run it with settings the
// caller did not ask for.
std::string options_refusal(const PluginInfo& info, const PluginOptions& options) {
  if (options.empty()) return "";
  if (info.abi_minor < 4)
    return info.name + " speaks ABI " + std::to_string(info.abi_major) + "." + std::to_string(info.abi_minor) +
           ", which has no plugin options (they came in 1.4), so it cannot be given " + key_list(options);
  for (const auto& [key, value] : options) {
    if (key.empty()) return "an option for " + info.name + " has an empty key";
    // The strings cross the ABI NUL-terminated: an embedded NUL would cut them short unseen.
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos)
      return "option '" + std::string(key.c_str()) + "' for " + info.name + " holds a NUL character";
  }
  return "";
}

std::string plugin_message(const H2_PluginApi& api) {
  const char* message = api.last_error != nullptr ? api.last_error() : nullptr;
  return message != nullptr && *message != '\0' ? message : "(the plugin gave no message)";
}

}  // namespace

std::string state_message(PluginState state, const std::string& detail) {
  const std::string_view name = plugin_state_name(state);
  if (detail.starts_with(name)) return detail;
  return std::string(name) + ": " + detail;
}

DeviceProperties to_device_properties(const H2_DeviceProperties& props) {
  DeviceProperties out;
  out.name = std::string(props.name, strnlen(props.name, sizeof props.name));
  out.vendor = std::string(props.vendor, strnlen(props.vendor, sizeof props.vendor));
  out.bus_id = std::string(props.bus_id, strnlen(props.bus_id, sizeof props.bus_id));
  switch (props.kind) {
    case H2_DEVICE_KIND_CPU: out.kind = DeviceKind::cpu; break;
    case H2_DEVICE_KIND_GPU: out.kind = DeviceKind::gpu; break;
    case H2_DEVICE_KIND_NPU: out.kind = DeviceKind::npu; break;
    default: out.kind = DeviceKind::unknown; break;
  }
  out.compute_units = props.compute_units;
  out.total_memory_bytes = props.total_memory_bytes;
  out.memory_bandwidth_bytes_per_s = props.memory_bandwidth_bytes_per_s;
  for (DType dtype : kAllDTypes) {
    const auto bit = static_cast<uint32_t>(dtype);
    if (props.supported_dtypes & (uint64_t{1} << bit)) out.supported_dtypes.push_back(dtype);
    if (props.peak_flops[bit] > 0) out.peak_flops[dtype] = props.peak_flops[bit];
  }
  out.nic_direct_host = (props.nic_direct_memory & H2_NIC_DIRECT_HOST) != 0;
  out.nic_direct_cuda = (props.nic_direct_memory & H2_NIC_DIRECT_CUDA) != 0;
  out.nic_direct_dmabuf = (props.nic_direct_memory & H2_NIC_DIRECT_DMABUF) != 0;
  out.host_accessible = props.host_accessible != 0;
  return out;
}

namespace {

OpenedPlugin refused(PluginInfo info, PluginState state, const std::string& detail) {
  info.state = state;
  info.message = state_message(state, detail);
  return {std::move(info), nullptr, nullptr};
}

}  // namespace

OpenedPlugin open_plugin(const fs::path& path) {
  PluginInfo info;
  info.path = path.string();
  info.name = plugin_name_from_file(path).value_or(path.filename().string());

  std::error_code ec;
  if (!fs::exists(path, ec)) return refused(info, PluginState::not_installed, "no file at " + path.string());
  if (!fs::is_regular_file(path, ec) || !has_elf_header(path))
    return refused(info, PluginState::not_a_library, path.string() + " has no ELF header");

  // ---- Open the library ----
  auto library = std::make_shared<boost::dll::shared_library>();
  try {
    library->load(path.string(), boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    const std::string message = loader_message(path, e.what());
    const PluginState state = classify_load_failure(path, message);
    return refused(info, state, "the dynamic loader refused it: " + message);
  }

  // ---- Find the entry point and read the table ----
  if (!library->has(H2_PLUGIN_ENTRY_POINT))
    return refused(info, PluginState::no_entry_point,
                   "the library does not export " + std::string(H2_PLUGIN_ENTRY_POINT) + "; is it an H2 plugin?");
  auto get_api = library->get<const H2_PluginApi*(uint32_t)>(H2_PLUGIN_ENTRY_POINT);
  const H2_PluginApi* table = get_api(H2_ABI_MAJOR);
  if (table == nullptr)
    return refused(info, PluginState::invalid_table, std::string(H2_PLUGIN_ENTRY_POINT) + " returned NULL");
  if (table->struct_size < H2_PLUGIN_API_IDENTITY_SIZE)
    return refused(info, PluginState::invalid_table,
                   "API table struct_size " + std::to_string(table->struct_size) +
                       " is too small to hold even the version fields (" + std::to_string(H2_PLUGIN_API_IDENTITY_SIZE) +
                       " bytes)");
  info.abi_major = table->abi_major;
  info.abi_minor = table->abi_minor;
  if (table->plugin_name != nullptr && *table->plugin_name != '\0') info.name = table->plugin_name;
  if (table->plugin_version != nullptr) info.version = table->plugin_version;

  const AbiCheck abi = check_abi(table->abi_major, table->abi_minor, table->struct_size, core_abi_history());
  if (abi.verdict == AbiVerdict::version_mismatch) return refused(info, PluginState::abi_mismatch, abi.message);
  if (abi.verdict == AbiVerdict::table_too_small) return refused(info, PluginState::invalid_table, abi.message);
  return {std::move(info), std::move(library), table};
}

namespace {

LoadedPlugin load_plugin_file(const fs::path& path, const std::map<std::string, PluginOptions>& all_options) {
  OpenedPlugin opened = open_plugin(path);
  PluginInfo& info = opened.info;
  if (opened.table == nullptr) return {std::move(info), nullptr, {}};
  const H2_PluginApi* table = opened.table;

  // Copy what the plugin's struct_size covers; every slot beyond it stays NULL (unsupported).
  H2_PluginApi api;
  std::memset(&api, 0, sizeof api);
  std::memcpy(&api, table, std::min(sizeof api, table->struct_size));
  if (const char* slot = missing_required_slot(api))
    return failure(info, PluginState::invalid_table, std::string("required slot '") + slot + "' is NULL");
  if ((api.host_alloc == nullptr) != (api.host_free == nullptr))
    return failure(info, PluginState::invalid_table, "host_alloc and host_free must both be set or both be NULL");
  const int sharing_slots = (api.mem_export != nullptr) + (api.mem_import != nullptr) + (api.mem_close != nullptr);
  if (sharing_slots != 0 && sharing_slots != 3)
    return failure(info, PluginState::invalid_table,
                   "mem_export, mem_import and mem_close must all be set or all be NULL");
  if ((api.mem_alloc_async == nullptr) != (api.mem_free_async == nullptr))
    return failure(info, PluginState::invalid_table,
                   "mem_alloc_async and mem_free_async must both be set or both be NULL");
  if (api.op_table != nullptr && table->abi_minor == 0)
    return failure(info, PluginState::invalid_table, "op_table must be NULL in ABI 1.0");
  // The same rule for the operator table: read what its struct_size covers, the rest is NULL.
  H2_OpTable ops;
  std::memset(&ops, 0, sizeof ops);
  if (api.op_table != nullptr) {
    if (api.op_table->struct_size < H2_OP_TABLE_SIZE_1_1)
      return failure(info, PluginState::invalid_table,
                     "op_table struct_size " + std::to_string(api.op_table->struct_size) + " is smaller than the " +
                         std::to_string(H2_OP_TABLE_SIZE_1_1) + " bytes ABI 1.1 requires");
    std::memcpy(&ops, api.op_table, std::min(sizeof ops, api.op_table->struct_size));
    if (ops.capability == nullptr)
      return failure(info, PluginState::invalid_table, "op_table's required slot 'capability' is NULL");
  }

  // The collective table (ABI 1.5): every slot of what its struct_size covers is required.
  H2_CollectiveTable collectives;
  std::memset(&collectives, 0, sizeof collectives);
  if (api.collective_table != nullptr) {
    if (const std::string fault = collective_table_fault(*api.collective_table); !fault.empty())
      return failure(info, PluginState::invalid_table, fault);
    std::memcpy(&collectives, api.collective_table, std::min(sizeof collectives, api.collective_table->struct_size));
    if (collectives.unique_id_bytes == 0) {
      // A 1.5 table's reserved0 means NCCL's 128 bytes; from 1.6 on the field is required.
      if (info.abi_minor >= 6)
        return failure(info, PluginState::invalid_table,
                       "collective_table's unique_id_bytes is 0 (ABI 1.6 asks for the size of the library's id)");
      collectives.unique_id_bytes = 128;
    }
  }

  // ---- Options (ABI 1.4) ----
  const PluginOptions& options = options_for(info.name, all_options);
  if (const std::string refusal = options_refusal(info, options); !refusal.empty())
    return failure(info, PluginState::init_failed, refusal);
  std::vector<H2_Option> option_array;
  for (const auto& [key, value] : options)
    option_array.push_back(H2_Option{.struct_size = sizeof(H2_Option), .key = key.c_str(), .value = value.c_str()});

  // ---- Initialize ----
  auto handle = std::make_shared<PluginHandle>(opened.library, api, ops, collectives, info.name);
  H2_InitArgs args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.core_abi_major = H2_ABI_MAJOR;
  args.core_abi_minor = H2_ABI_MINOR;
  args.log = plugin_log_callback;
  args.log_user_data = handle.get();
  args.log_level = static_cast<uint32_t>(log_level());
  args.options = option_array.empty() ? nullptr : option_array.data();
  args.option_count = option_array.size();
  const H2_Status status = api.initialize(&args);
  if (status == H2_STATUS_RUNTIME_MISSING) return failure(info, PluginState::runtime_missing, plugin_message(api));
  if (status == H2_STATUS_NO_DEVICE) return failure(info, PluginState::no_device, plugin_message(api));
  if (status != H2_STATUS_OK)
    return failure(info, PluginState::init_failed,
                   "init failed (" + std::string(status_name(status)) + "): " + plugin_message(api));
  handle->set_initialized();

  // ---- Devices ----
  LoadedPlugin loaded{info, handle, {}};
  int32_t count = 0;
  H2_Status count_status = api.device_count(&count);
  if (count_status != H2_STATUS_OK)
    return failure(info, PluginState::init_failed, "device_count failed: " + plugin_message(api));
  if (count <= 0)
    return failure(info, PluginState::no_device, "initialize succeeded but the plugin reports no devices");
  for (int32_t i = 0; i < count; ++i) {
    H2_DeviceProperties props;
    std::memset(&props, 0, sizeof props);
    props.struct_size = sizeof props;
    if (api.device_properties(i, &props) != H2_STATUS_OK)
      return failure(info, PluginState::init_failed,
                     "device_properties(" + std::to_string(i) + ") failed: " + plugin_message(api));
    loaded.devices.push_back(to_device_properties(props));
  }
  try {
    handle->make_allocators(count);
  } catch (const Error& e) {
    return failure(info, PluginState::init_failed, e.what());
  }
  if (api.op_table != nullptr) {
    try {
      handle->query_capabilities(count);
    } catch (const Error& e) {
      return failure(info, PluginState::init_failed, e.what());
    }
  }
  loaded.info.device_count = count;
  loaded.info.state = PluginState::loaded;
  log(LogLevel::debug, "core", "loaded plugin " + info.name + " from " + path.string());
  return loaded;
}

// Live plugins by canonical file path. Entries expire when the last user releases the plugin.
struct LiveRegistry {
  std::mutex mutex;
  std::map<fs::path, std::weak_ptr<PluginHandle>> handles;
  std::map<fs::path, LoadedPlugin> descriptions;  // info and device properties, without the handle
  std::map<fs::path, PluginOptions> options;      // what each was initialized with
};

std::string options_text(const PluginOptions& options) {
  if (options.empty()) return "no options";
  std::string text;
  for (const auto& [key, value] : options) text += (text.empty() ? "" : ", ") + key + "=" + value;
  return text;
}

LiveRegistry& live_registry() {
  static LiveRegistry registry;
  return registry;
}

fs::path registry_key(const fs::path& path) {
  std::error_code ec;
  fs::path key = fs::weakly_canonical(path, ec);
  return ec ? path : key;
}

}  // namespace

bool plugin_is_live(const fs::path& path) {
  LiveRegistry& registry = live_registry();
  std::lock_guard lock(registry.mutex);
  const auto found = registry.handles.find(registry_key(path));
  return found != registry.handles.end() && !found->second.expired();
}

LoadedPlugin load_plugin(const fs::path& path, const std::map<std::string, PluginOptions>& options) {
  const fs::path key = registry_key(path);

  LiveRegistry& registry = live_registry();
  std::lock_guard lock(registry.mutex);
  if (auto handle = registry.handles[key].lock()) {
    LoadedPlugin shared = registry.descriptions.at(key);
    const PluginOptions& wanted = options_for(shared.info.name, options);
    const PluginOptions& had = registry.options.at(key);
    if (const std::string refusal = options_refusal(shared.info, wanted); !refusal.empty())
      return failure(shared.info, PluginState::init_failed, refusal);
    if (wanted != had)
      return failure(shared.info, PluginState::init_failed,
                     shared.info.name + " is already loaded in this process with " + options_text(had) + ", not with " +
                         options_text(wanted) +
                         ": a plugin is initialized once per process, so its options cannot change while it is loaded");
    shared.handle = std::move(handle);
    return shared;
  }
  LoadedPlugin loaded = load_plugin_file(path, options);
  if (loaded.handle) {
    registry.handles[key] = loaded.handle;
    registry.descriptions[key] = LoadedPlugin{loaded.info, nullptr, loaded.devices};
    registry.options[key] = options_for(loaded.info.name, options);
  }
  return loaded;
}

}  // namespace h2::detail
