// The entry point of the C++ API: finds plugins, loads them, and lists their devices.
//
// Plugins are shared libraries named libh2-plugin-NAME.so, found in the directories (or files) of
// H2_PLUGIN_PATH (colon-separated) and then in the install directory. Loading never throws: every
// plugin found gets a PluginInfo saying whether it loaded and, if not, exactly why.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "h2/device.hpp"

namespace h2 {

enum class PluginState {
  loaded,
  not_installed,    // no such file, or no plugin of that name in the search path
  not_a_library,    // the file is not a loadable shared library
  load_failed,      // the dynamic loader refused it (e.g. a library it needs is missing)
  no_entry_point,   // h2_plugin_get_api is not exported
  abi_mismatch,     // its ABI version is not compatible with the core's
  invalid_table,    // its API table is malformed (struct_size too small, required slot NULL)
  runtime_missing,  // the vendor runtime library is not installed
  no_device,        // the vendor runtime found no usable device
  init_failed,      // initialize (or the first device queries) failed
  duplicate,        // another plugin of the same name was found first
  crashed,          // loading it in a child process ended that process (a signal, or exit)
  hung,             // loading it in a child process did not finish within the probe's time limit
};

// "loaded", "not installed", "ABI mismatch", ...
std::string_view plugin_state_name(PluginState state);

struct PluginInfo {
  std::string name;  // the plugin's own name once loaded, else taken from the file name
  std::string path;
  PluginState state = PluginState::not_installed;
  std::string message;                    // why it is not loaded; empty when loaded
  std::string version;                    // the plugin's release, when it could be read
  uint32_t abi_major = 0, abi_minor = 0;  // when they could be read
  int device_count = 0;

  bool loaded() const { return state == PluginState::loaded; }
  // States that mean "this machine lacks the hardware or vendor software", not "the plugin is broken".
  bool unavailable() const { return state == PluginState::runtime_missing || state == PluginState::no_device; }
};

// A plugin's options (ABI 1.4): key -> value, as the plugin documents them (h2 devices --plugin NAME
// --options lists them). Values are strings; the plugin parses them.
using PluginOptions = std::map<std::string, std::string>;

struct RuntimeOptions {
  // Plugins to load, each a NAME (looked up as libh2-plugin-NAME.so) or a PATH to a file.
  // Empty: every plugin in the search path.
  // While the process has one thread, each plugin not yet loaded in it is first loaded in a child
  // process (H2_PLUGIN_PROBE_TIMEOUT seconds at most, default 60; 0: never): one that crashes, exits
  // or hangs there is listed as crashed or hung and not loaded here.
  std::vector<std::string> plugins;
  // Overrides H2_PLUGIN_PATH and the install directory.
  std::optional<std::vector<std::filesystem::path>> search_path;
  // Overrides H2_PLUGIN_PROBE_TIMEOUT (0: no probe, for a process that is itself an isolated child).
  std::optional<double> probe_timeout_seconds;
  // Options by plugin name (the name a plugin reports, e.g. "cpu-reference"), passed to that plugin's
  // initialize, and to the probe's. An option overrides the plugin's environment variable for the same
  // setting. A key the plugin does not know, or a value it refuses, fails its loading (init failed,
  // naming the key). A plugin older than ABI 1.4 cannot take options: given some, it is not loaded
  // (init failed, naming its minor and the keys). Options for a plugin that is not loaded are not
  // used, so one set of options can serve processes that load different plugins. A plugin already
  // loaded in this process with other options is not loaded again (init failed): it is initialized
  // once per process.
  std::map<std::string, PluginOptions> plugin_options;
};

class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const std::vector<PluginInfo>& plugins() const { return plugins_; }
  const std::vector<Device>& devices() const { return devices_; }
  std::vector<Device> devices(std::string_view plugin) const;
  // Throws h2::Error naming the plugin's state when it is not loaded or `index` is out of range.
  Device device(std::string_view plugin, int index) const;

  // H2_PLUGIN_PATH's entries followed by the install directory.
  static std::vector<std::filesystem::path> default_search_path();

 private:
  std::vector<PluginInfo> plugins_;
  std::vector<Device> devices_;
};

// One documented key of a plugin (the ABI's H2_OptionInfo).
struct PluginOptionInfo {
  std::string key;
  std::string description;
  std::string default_value;
};

// What a plugin says about its options, read without initializing it.
struct PluginOptionListing {
  std::string name;   // the plugin's own name once its table was read, else from the file name
  std::string path;   // the file, when one was found
  std::string error;  // why the keys could not be read (no such plugin, not a plugin, ABI mismatch); "" if read
  uint32_t abi_minor = 0;
  bool listed = false;  // the plugin has option_list (ABI 1.4 and the slot set); false: it lists no keys
  std::vector<PluginOptionInfo> options;
};

// Opens the plugin `spec` (a NAME looked up in `search_path`, default Runtime::default_search_path(),
// or a PATH) and reads its option_list, without calling initialize: so the keys of a plugin whose
// hardware, runtime or configuration is missing can still be listed. Its library constructors run in
// this process. Never throws for a bad plugin: `error` says what is wrong.
PluginOptionListing list_plugin_options(const std::string& spec,
                                        const std::optional<std::vector<std::filesystem::path>>& search_path = {});

}  // namespace h2
