// `h2 devices` as a user runs it: the listing, the JSON, and for each broken plugin its own message
// and a non-zero exit, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include <string>
#include "cli_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
using testing::Not;

using Result = h2::test::CliResult;
using h2::test::env_or_fail;

Result h2(const std::string& args, const std::string& environment = "") {
  return h2::test::run_h2(args, environment);
}
std::string env(const char* name) {
  return env_or_fail(name);
}

std::string fake(const std::string& name) {
  return (fs::path(env("H2_TEST_FAKE_PLUGIN_DIR")) / ("libh2-plugin-" + name + ".so")).string();
}

TEST(H2Devices, ListsTheConfiguredCpuReferenceDevicesAndCapacities) {
  Result r = h2("devices", "H2_CPU_REFERENCE_MEMORY=1GiB,512MiB,256MiB");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The plugin speaks the core's ABI, which the first line names.
  std::smatch abi;
  ASSERT_TRUE(std::regex_search(r.output, abi, std::regex("plugin ABI ([0-9]+\\.[0-9]+)"))) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cpu-reference  " + abi[1].str()));
  // Its collective library (ABI 1.5), and that it joins the processes of one node.
  EXPECT_THAT(r.output, HasSubstr("cpu-reference shared memory (one node)"));
  EXPECT_THAT(r.output, HasSubstr("loaded"));
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:0"));
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:2"));
  EXPECT_THAT(r.output, Not(HasSubstr("cpu-reference:3")));
  EXPECT_THAT(r.output, HasSubstr("1.00 GiB"));
  EXPECT_THAT(r.output, HasSubstr("512.00 MiB"));
  EXPECT_THAT(r.output, HasSubstr("256.00 MiB"));
}

TEST(H2Devices, JsonHasEveryDeviceWithItsProperties) {
  Result r = h2("devices --json", "H2_CPU_REFERENCE_DEVICES=2 H2_CPU_REFERENCE_MEMORY=64MiB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["abi"]["major"], 1);
  // Other plugins of the build (CUDA) may be listed too.
  const auto found = std::find_if(j["plugins"].begin(), j["plugins"].end(),
                                  [](const auto& p) { return p["name"] == "cpu-reference"; });
  ASSERT_NE(found, j["plugins"].end()) << r.output;
  const auto& plugin = *found;
  EXPECT_EQ(plugin["state"], "loaded");
  EXPECT_EQ(plugin["collective_library"]["name"], "cpu-reference shared memory");
  EXPECT_EQ(plugin["collective_library"]["scope"], "node");
  ASSERT_EQ(plugin["devices"].size(), 2u);
  for (const auto& device : plugin["devices"]) {
    EXPECT_EQ(device["total_memory_bytes"], 64u << 20);
    EXPECT_EQ(device["kind"], "cpu");
    EXPECT_THAT(device["supported_dtypes"].get<std::vector<std::string>>(), testing::Contains("bf16"));
  }
}

// The CUDA plugin builds without a GPU; on such a machine it must say why it has no device, exit
// non-zero when asked for by name, and leave the listing of every plugin working.
TEST(H2Devices, CudaPluginSaysPlainlyWhenThereIsNoGpu) {
  const char* cuda = std::getenv("H2_TEST_CUDA_PLUGIN");
  if (cuda == nullptr) GTEST_SKIP() << "the CUDA plugin is not part of this build";
  Result named = h2(std::string("devices --json --plugin ") + cuda);
  auto j = nlohmann::json::parse(named.output);
  ASSERT_EQ(j["plugins"].size(), 1u) << named.output;
  const auto& plugin = j["plugins"][0];
  EXPECT_EQ(plugin["name"], "cuda");
  if (plugin["state"] == "loaded") {  // a machine with a GPU
    EXPECT_EQ(named.exit_code, 0) << named.output;
    EXPECT_GE(plugin["devices"].size(), 1u);
    EXPECT_EQ(plugin["devices"][0]["kind"], "gpu");
    return;
  }
  EXPECT_EQ(named.exit_code, 1) << named.output;
  EXPECT_THAT(plugin["state"].get<std::string>(), testing::AnyOf("vendor runtime missing", "no device"));
  EXPECT_THAT(plugin["message"].get<std::string>(),
              testing::AnyOf(HasSubstr("no NVIDIA driver"), HasSubstr("no CUDA device")));
  Result all = h2("devices");
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_THAT(all.output, HasSubstr("cpu-reference:0"));
}

struct BrokenCase {
  const char* plugin;
  const char* message;
};

class BrokenPlugin : public testing::TestWithParam<BrokenCase> {};

TEST_P(BrokenPlugin, PrintsItsOwnMessageAndExitsNonZero) {
  const BrokenCase& c = GetParam();
  const std::string path = std::string(c.plugin).starts_with("/") ? c.plugin : fake(c.plugin);
  for (const char* format : {"", "--json"}) {
    Result r = h2(std::string("devices ") + format + " --plugin " + path);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EachFailure, BrokenPlugin,
    testing::Values(
        BrokenCase{"/nonexistent/libh2-plugin-gone.so", "not installed: no file at /nonexistent/libh2-plugin-gone.so"},
        BrokenCase{"/etc/hostname", "not a shared library: /etc/hostname has no ELF header"},
        BrokenCase{"no-entry", "entry point missing: the library does not export h2_plugin_get_api"},
        BrokenCase{"undefined-symbol", "load failed: the dynamic loader refused it"},
        // (the core's minor moves with every ABI minor; the newer plugin is always one ahead)
        BrokenCase{"abi-major", "ABI mismatch (plugin 2.3, core 1."},
        BrokenCase{"abi-minor-newer", "the plugin needs a newer H2 core"},
        BrokenCase{"small-table", "invalid API table: API table struct_size 64 is smaller"},
        BrokenCase{"null-slot", "invalid API table: required slot 'memset_async' is NULL"},
        BrokenCase{"init-fails", "init failed (device error): simulated driver failure"},
        BrokenCase{"runtime-missing", "vendor runtime missing: cannot load libh2-absent-vendor-runtime.so.1"}),
    [](const testing::TestParamInfo<BrokenCase>& info) {
      std::string name = fs::path(info.param.plugin).stem().string();
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

TEST(H2Devices, UnknownPluginNameSaysWhereItLooked) {
  Result r = h2("devices --plugin nosuch");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("not installed: no libh2-plugin-nosuch.so in the plugin search path"));
}

TEST(H2Devices, AnOlderMinorPluginLoads) {
  Result r = h2("devices --plugin " + fake("old-minor"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("old-minor:1"));
}

TEST(H2Devices, DiscoveryFailsWhenAPluginInThePathIsBroken) {
  Result r = h2("devices", "H2_PLUGIN_PATH=" + env("H2_PLUGIN_PATH") + ":" + env("H2_TEST_FAKE_PLUGIN_DIR"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:0"));
  EXPECT_THAT(r.output, HasSubstr("abi-major: ABI mismatch"));
}

// A plugin that crashes, exits or hangs while it loads used to take `h2 devices` down with it (no
// other plugin listed; exit 3 with no output; a hang). Each is probed in a child process first.
TEST(H2Devices, PluginsThatCrashExitOrHangWhileLoadingAreListedAndTheOthersStillWork) {
  const std::string dir = env("H2_TEST_CRASHING_PLUGIN_DIR");
  Result r = h2("devices --json", "H2_PLUGIN_PROBE_TIMEOUT=3 H2_PLUGIN_PATH=" + env("H2_PLUGIN_PATH") + ":" + dir);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string json_text = r.output.substr(r.output.find('{'));
  const auto j = nlohmann::json::parse(json_text);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& plugin : j["plugins"]) by_name[plugin["name"]] = plugin;
  ASSERT_TRUE(by_name.count("cpu-reference")) << r.output;
  EXPECT_EQ(by_name["cpu-reference"]["state"], "loaded");
  for (const char* name : {"init-crash", "init-exit", "init-hang", "constructor-abort"})
    ASSERT_TRUE(by_name.count(name)) << name << r.output;
  EXPECT_EQ(by_name["init-crash"]["state"], "crashed");
  EXPECT_THAT(by_name["init-crash"]["message"].get<std::string>(),
              HasSubstr("killed by SIGSEGV while a child process loaded it"));
  EXPECT_EQ(by_name["constructor-abort"]["state"], "crashed");
  EXPECT_THAT(by_name["constructor-abort"]["message"].get<std::string>(), HasSubstr("killed by SIGABRT"));
  EXPECT_EQ(by_name["init-exit"]["state"], "crashed");
  EXPECT_THAT(by_name["init-exit"]["message"].get<std::string>(), HasSubstr("ended with exit code 3"));
  EXPECT_EQ(by_name["init-hang"]["state"], "hung");
  EXPECT_THAT(by_name["init-hang"]["message"].get<std::string>(), HasSubstr("did not finish within 3 s"));

  r = h2("devices", "H2_PLUGIN_PROBE_TIMEOUT=soon H2_PLUGIN_PATH=" + dir);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("H2_PLUGIN_PROBE_TIMEOUT='soon'"));
}

TEST(H2Devices, DiscoverySucceedsWhenAPluginOnlyLacksItsVendorRuntime) {
  // A machine without a vendor's runtime is not broken: listing everything still exits 0.
  Result r = h2("devices", "H2_PLUGIN_PATH=" + env("H2_PLUGIN_PATH") + ":" + fake("runtime-missing"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("runtime-missing: vendor runtime missing"));
}

TEST(H2Devices, BadPluginConfigurationIsReportedNotCrashed) {
  Result r = h2("devices", "H2_CPU_REFERENCE_DEVICES=lots");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("H2_CPU_REFERENCE_DEVICES='lots'"));
}

TEST(H2Devices, WrongFlagsAreUsageErrors) {
  Result bad_flag = h2("devices --bogus");
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_THAT(bad_flag.output, HasSubstr("--bogus"));
  Result no_command = h2("");
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_THAT(no_command.output, HasSubstr("a command is required"));
  Result unknown = h2("frobnicate");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.output, HasSubstr("frobnicate"));
  Result out_of_range = h2("train --cluster /dev/null --model /dev/null --steps 0");  // a failed validator
  EXPECT_EQ(out_of_range.exit_code, 2);
  EXPECT_THAT(out_of_range.output, HasSubstr("--steps"));
  EXPECT_EQ(h2("--version").exit_code, 0);
}

TEST(H2Devices, EmptySearchPathSaysNoPluginsWereFound) {
  if (fs::exists(H2_INSTALLED_PLUGIN_DIR)) GTEST_SKIP() << "H2 is installed on this machine; its plugins are found";
  fs::path empty = fs::temp_directory_path() / "h2-empty-plugin-dir";
  fs::create_directories(empty);
  Result r = h2("devices", "H2_PLUGIN_PATH=" + empty.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("no plugins found"));
}

// ---- Plugin options: --options lists the keys, --plugin-option passes them ----

TEST(H2DevicesOptions, ListsAPluginsKeysWithDefaultsAndDescriptions) {
  // Listed without initializing: a configuration that breaks initialize does not hide the keys.
  Result r = h2("devices --plugin cpu-reference --options", "H2_CPU_REFERENCE_MEMORY=lots");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("as --plugin-option cpu-reference:KEY=VALUE"));
  EXPECT_THAT(r.output, testing::ContainsRegex("KEY +DEFAULT +DESCRIPTION"));
  EXPECT_THAT(r.output, testing::ContainsRegex("memory +4GiB +capacity per device"));
  for (const char* key : {"devices", "strict", "blocking", "op_dtypes", "threads", "collectives_in_place"})
    EXPECT_THAT(r.output, HasSubstr(key));
}

TEST(H2DevicesOptions, JsonHasEachKeyWithItsDefaultAndDescription) {
  Result r = h2("devices --plugin cpu-reference --plugin " + fake("minor-3") + " --options --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  ASSERT_EQ(j["plugins"].size(), 2u);
  const auto& reference = j["plugins"][0];
  EXPECT_EQ(reference["name"], "cpu-reference");
  EXPECT_EQ(reference["listed"], true);
  EXPECT_TRUE(reference["error"].is_null());
  ASSERT_EQ(reference["options"].size(), 7u);
  EXPECT_EQ(reference["options"][1]["key"], "memory");
  EXPECT_EQ(reference["options"][1]["default"], "4GiB");
  EXPECT_THAT(reference["options"][1]["description"].get<std::string>(), HasSubstr("H2_CPU_REFERENCE_MEMORY"));
  const auto& older = j["plugins"][1];
  EXPECT_EQ(older["listed"], false);
  EXPECT_THAT(older["note"].get<std::string>(), HasSubstr("minor-3 speaks ABI 1.3, which has no plugin options"));
}

TEST(H2DevicesOptions, NeedsAPluginAndFailsForOneThatIsNotThere) {
  Result alone = h2("devices --options");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_THAT(alone.output, HasSubstr("--plugin"));
  Result ghost = h2("devices --plugin ghost --options");
  EXPECT_EQ(ghost.exit_code, 1) << ghost.output;
  EXPECT_THAT(ghost.output, HasSubstr("ghost: no libh2-plugin-ghost.so in the plugin search path"));
}

TEST(H2DevicesOptions, AnOptionOverridesTheEnvironmentVariable) {
  Result r = h2("devices --plugin cpu-reference --plugin-option cpu-reference:devices=2",
                "H2_CPU_REFERENCE_DEVICES=3 H2_CPU_REFERENCE_MEMORY=64MiB");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cpu-reference:1"));
  EXPECT_THAT(r.output, Not(HasSubstr("cpu-reference:2")));
  EXPECT_THAT(r.output, HasSubstr("64.00 MiB"));  // the variable of another key still applies
  EXPECT_THAT(r.output, HasSubstr("option devices='2' overrides H2_CPU_REFERENCE_DEVICES='3'"));
}

TEST(H2DevicesOptions, AnUnknownKeyIsAnInitFailureListingTheKnownKeys) {
  Result r = h2("devices --plugin cpu-reference --plugin-option cpu-reference:memroy=1GiB");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unknown option 'memroy' for plugin cpu-reference: its keys are devices, memory"));
  Result bad = h2("devices --plugin cpu-reference --plugin-option cpu-reference:memory=lots");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("option memory='lots'"));
}

TEST(H2DevicesOptions, APluginOlderThan1_4RefusesOptionsByName) {
  Result r = h2("devices --plugin " + fake("minor-3") + " --plugin-option minor-3:devices=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("minor-3 speaks ABI 1.3, which has no plugin options (they came in 1.4), so it "
                                  "cannot be given devices"));
  EXPECT_EQ(h2("devices --plugin " + fake("minor-3")).exit_code, 0);
}

TEST(H2DevicesOptions, MalformedOrUnusedOptionsAreUsageErrors) {
  Result malformed = h2("devices --plugin-option memory=1GiB");
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_THAT(malformed.output, HasSubstr("'memory=1GiB' is not PLUGIN:KEY=VALUE"));
  Result twice = h2("devices --plugin-option cpu-reference:devices=1 --plugin-option cpu-reference:devices=2");
  EXPECT_EQ(twice.exit_code, 2) << twice.output;
  EXPECT_THAT(twice.output, HasSubstr("cpu-reference:devices is given twice"));
  Result unused = h2("devices --plugin cpu-reference --plugin-option cpu-refrence:devices=2");
  EXPECT_EQ(unused.exit_code, 2) << unused.output;
  EXPECT_THAT(unused.output, HasSubstr("names plugin 'cpu-refrence', which was not found"));
}

// The child process that probes a plugin loads it with the same options: a plugin that crashes only
// with some setting is listed as crashed instead of taking h2 down.
TEST(H2DevicesOptions, TheProbeLoadsThePluginWithItsOptions) {
  const std::string plugin = (fs::path(env("H2_TEST_CRASHING_PLUGIN_DIR")) / "libh2-plugin-crash-option.so").string();
  EXPECT_EQ(h2("devices --plugin " + plugin).exit_code, 0);
  Result r = h2("devices --plugin " + plugin + " --plugin-option crash-option:crash=1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("crash-option: crashed: killed by SIGSEGV while a child process loaded it"));
}

// ---- h2 devices --nics ----

// The entry of `nics` named `name`, or null.
const nlohmann::json* nic_named(const nlohmann::json& listing, const std::string& name) {
  for (const auto& nic : listing["nics"])
    if (nic["name"] == name) return &nic;
  return nullptr;
}

// Each nic_types entry must be one a cluster description accepts (heteroauto's parse_cluster
// rejects unknown keys), and latency is not invented.
void expect_planner_nic_types(const nlohmann::json& types) {
  ASSERT_TRUE(types.is_array()) << types.dump();
  std::set<std::string> names;
  for (const auto& type : types) {
    std::set<std::string> keys;
    for (const auto& [key, value] : type.items()) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"name", "type", "bandwidth_gbps"})) << type.dump();
    EXPECT_THAT(type["type"].get<std::string>(), testing::AnyOf("infiniband", "roce", "ethernet"));
    EXPECT_GT(type["bandwidth_gbps"].get<double>(), 0);
    EXPECT_TRUE(names.insert(type["name"].get<std::string>()).second) << "name used twice: " << type.dump();
  }
}

TEST(H2DevicesNics, ListsTheLoopbackAndWhatRdmaAndLibfabricOffer) {
  Result r = h2("devices --nics");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("NIC "));
  EXPECT_THAT(r.output, testing::ContainsRegex("  lo +loopback +- +up +127\\.0\\.0\\.1"));
  EXPECT_THAT(r.output, testing::ContainsRegex("libfabric [0-9]+\\.[0-9]+: RDM providers .*shm"));
  EXPECT_THAT(r.output, HasSubstr("Planner nic_types"));
  EXPECT_THAT(r.output, Not(HasSubstr("Plugins")));  // NICs replace the plugin listing
  if (!fs::exists("/sys/class/infiniband")) {        // no RDMA in this kernel: the reason is printed
    EXPECT_THAT(r.output, HasSubstr("RDMA: no devices (ibv_get_device_list"));
  }
}

TEST(H2DevicesNics, SaysWhetherEachPluginsMemoryGoesDeviceDirectOrStaged) {
  Result r = h2("devices --nics");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Device memory on the network (DiComm)"));
  EXPECT_THAT(r.output,
              testing::ContainsRegex("cpu-reference +point-to-point +device-direct +its memory is host memory"));
  EXPECT_THAT(r.output, testing::ContainsRegex("sums between nodes +device-direct +DiComm's own algorithms "
                                               "\\(H2_DICOMM_VENDOR_COLLECTIVES is off, the default\\)"));
  Result j = h2("devices --nics --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const auto listing = nlohmann::json::parse(j.output);
  ASSERT_TRUE(listing.contains("device_memory")) << j.output;
  bool found = false;
  for (const auto& entry : listing["device_memory"]) {
    if (entry["plugin"] != "cpu-reference") continue;
    found = true;
    EXPECT_EQ(entry["device_direct"], true);
    EXPECT_THAT(entry["why"].get<std::string>(), HasSubstr("device-direct"));
    EXPECT_EQ(entry["collectives"]["vendor_library"], false);
  }
  EXPECT_TRUE(found) << j.output;
}

// With the plugins' libraries allowed, a sum between nodes still runs on DiComm where the library
// (cpu-reference's shared memory) reaches one node only; a setting DiComm does not know is refused.
TEST(H2DevicesNics, SaysWhichLibrarySumsBetweenNodes) {
  Result r = h2("devices --nics", "H2_DICOMM_VENDOR_COLLECTIVES=auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(cpu-reference shared memory reaches one node only)"));
  Result bad = h2("devices --nics", "H2_DICOMM_VENDOR_COLLECTIVES=always");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("H2_DICOMM_VENDOR_COLLECTIVES='always' is not one of off, auto"));
}

TEST(H2DevicesNics, JsonHasTheNicsRdmaStatusLibfabricAndPlannerNicTypes) {
  Result r = h2("devices --nics --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  for (const char* key : {"nics", "rdma_status", "libfabric", "nic_types", "note"}) EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_THAT(j["libfabric"]["version"].get<std::string>(), testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  EXPECT_THAT(j["libfabric"]["providers"].get<std::vector<std::string>>(), testing::Contains("shm"));
  const nlohmann::json* lo = nic_named(j, "lo");
  ASSERT_NE(lo, nullptr) << r.output;
  EXPECT_EQ((*lo)["link_layer"], "loopback");
  EXPECT_EQ((*lo)["up"], true);
  EXPECT_EQ((*lo)["rdma"], false);
  EXPECT_TRUE((*lo)["speed_gbps"].is_null());
  EXPECT_THAT((*lo)["addresses"].get<std::vector<std::string>>(), testing::Contains("127.0.0.1"));
  for (const auto& nic : j["nics"])
    for (const char* key : {"name", "link_layer", "speed_gbps", "up", "addresses", "providers", "netdev", "rdma"})
      EXPECT_TRUE(nic.contains(key)) << key << " missing in " << nic.dump();
  const bool any_rdma =
      std::any_of(j["nics"].begin(), j["nics"].end(), [](const auto& n) { return n["rdma"] == true; });
  if (!any_rdma) {
    EXPECT_FALSE(j["rdma_status"].get<std::string>().empty());
  }
  expect_planner_nic_types(j["nic_types"]);
  EXPECT_THAT(j["note"].get<std::string>(), HasSubstr("latency_us"));
}

TEST(H2DevicesNics, PluginSelectionDoesNotApply) {
  Result r = h2("devices --nics --plugin cpu-reference");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--plugin excludes --nics"));
}

// A network namespace of its own, with a veth pair whose both ends stay inside it (198.18.0.0/15,
// the benchmarking range): discovery there sees exactly these interfaces, and the nic_types it
// suggests plan in a cluster description. Nothing is sent beyond the namespace, which is always
// deleted, veth pair included.
class NetworkNamespace {
 public:
  NetworkNamespace() : name_("h2test-" + std::to_string(::getpid())) {
    const std::string ip = "ip -n " + name_ + " ";
    const std::string setup = "ip netns add " + name_ + " && " + ip + "link add h2nic0 type veth peer name h2nic1 && " +
                              ip + "addr add 198.18.0.1/24 dev h2nic0 && " + ip +
                              "addr add 198.18.0.2/24 dev h2nic1 && " + ip + "link set lo up && " + ip +
                              "link set h2nic0 up && " + ip + "link set h2nic1 up";
    const std::string output = run(("(" + setup + ") 2>&1").c_str(), created_);
    if (!created_) {
      error_ = output;
      remove();
    }
  }
  ~NetworkNamespace() { remove(); }
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  bool created() const { return created_; }
  const std::string& error() const { return error_; }
  // Runs a shell command inside the namespace; stdout and stderr together.
  Result exec(const std::string& command) const {
    Result r;
    bool ok = false;
    r.output = run(("ip netns exec " + name_ + " " + command + " 2>&1").c_str(), ok, &r.exit_code);
    return r;
  }

 private:
  static std::string run(const char* command, bool& ok, int* exit_code = nullptr) {
    std::string output;
    FILE* pipe = popen(command, "r");
    if (pipe == nullptr) return "popen failed";
    std::array<char, 4096> chunk;
    size_t n;
    while ((n = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) output.append(chunk.data(), n);
    const int status = pclose(pipe);
    ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (exit_code != nullptr) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return output;
  }
  void remove() {
    bool ignored = false;
    run(("ip netns delete " + name_ + " 2>/dev/null").c_str(), ignored);
  }

  std::string name_;
  bool created_ = false;
  std::string error_;
};

TEST(H2DevicesNics, DiscoversAVethPairInANamespaceAndItsNicTypesPlan) {
  NetworkNamespace ns;
  if (!ns.created()) GTEST_SKIP() << "cannot create a network namespace with a veth pair here: " << ns.error();
  Result r = ns.exec(env("H2_TOOL") + " devices --nics --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const auto interfaces =
      std::count_if(j["nics"].begin(), j["nics"].end(), [](const auto& n) { return n["rdma"] == false; });
  EXPECT_EQ(interfaces, 3) << "lo and the veth pair only: " << r.output;
  for (const auto& [name, address] : {std::pair{"h2nic0", "198.18.0.1"}, std::pair{"h2nic1", "198.18.0.2"}}) {
    const nlohmann::json* nic = nic_named(j, name);
    ASSERT_NE(nic, nullptr) << name << " missing: " << r.output;
    EXPECT_EQ((*nic)["link_layer"], "Ethernet");
    EXPECT_EQ((*nic)["up"], true);
    EXPECT_EQ((*nic)["speed_gbps"], 10) << "veth reports 10000 Mb/s";
    EXPECT_THAT((*nic)["addresses"].get<std::vector<std::string>>(), testing::Contains(address));
    EXPECT_THAT((*nic)["providers"].get<std::vector<std::string>>(), testing::Contains("tcp;ofi_rxm"));
  }
  expect_planner_nic_types(j["nic_types"]);
  ASSERT_EQ(j["nic_types"].size(), 1u) << j["nic_types"].dump();
  EXPECT_EQ(j["nic_types"][0]["name"], "ethernet-10");
  EXPECT_EQ(j["nic_types"][0]["type"], "ethernet");

  // Pasted into a cluster description, the suggested NIC types are accepted and plan.
  const fs::path examples = fs::path(env("H2_SOURCE_ROOT")) / "examples";
  nlohmann::json cluster = nlohmann::json::parse(std::ifstream(examples / "clusters" / "local.json"));
  cluster["nic_types"] = j["nic_types"];
  for (auto& node : cluster["nodes"]) node["nic"] = "ethernet-10";
  const fs::path file = fs::temp_directory_path() / ("h2-nics-cluster-" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << cluster.dump(2);
  Result plan = h2("plan --cluster " + file.string() + " --model " + (examples / "models" / "gpt-tiny.json").string());
  fs::remove(file);
  EXPECT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_THAT(plan.output, HasSubstr("Plan 1:"));
}

}  // namespace
