// Loading plugins: a good plugin loads and reports its devices; each way a plugin can be broken gets
// its own state and a message that names the cause.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <mutex>
#include <vector>

#include "h2/h2.hpp"
#include "test_support.hpp"

namespace h2 {
namespace {

using test::fake_plugin;
using testing::HasSubstr;

PluginInfo load_one(const std::string& spec) {
  RuntimeOptions options;
  options.plugins = {spec};
  Runtime runtime(options);
  EXPECT_EQ(runtime.plugins().size(), 1u);
  return runtime.plugins().at(0);
}

TEST(PluginLoading, CpuReferenceLoadsAndReportsItsDevices) {
  test::ScopedEnv devices("H2_CPU_REFERENCE_DEVICES", "3");
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "256MiB");
  Runtime runtime(test::cpu_reference_only());
  ASSERT_EQ(runtime.plugins().size(), 1u);
  const PluginInfo& info = runtime.plugins()[0];
  ASSERT_TRUE(info.loaded()) << info.message;
  EXPECT_EQ(info.name, "cpu-reference");
  EXPECT_EQ(info.abi_major, H2_ABI_MAJOR);
  EXPECT_EQ(info.abi_minor, H2_ABI_MINOR);
  EXPECT_EQ(info.device_count, 3);
  ASSERT_EQ(runtime.devices().size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Device& device = runtime.devices()[static_cast<size_t>(i)];
    EXPECT_EQ(device.index(), i);
    EXPECT_EQ(device.label(), "cpu-reference:" + std::to_string(i));
    EXPECT_EQ(device.properties().kind, DeviceKind::cpu);
    EXPECT_EQ(device.properties().total_memory_bytes, 256u << 20);
    EXPECT_EQ(device.memory_info().free_bytes, 256u << 20);
  }
}

TEST(PluginLoading, CpuReferenceTakesOneCapacityPerDevice) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "1GiB, 512MiB,2GiB");
  Runtime runtime(test::cpu_reference_only());
  ASSERT_EQ(runtime.devices().size(), 3u);
  EXPECT_EQ(runtime.devices()[0].properties().total_memory_bytes, 1ull << 30);
  EXPECT_EQ(runtime.devices()[1].properties().total_memory_bytes, 512ull << 20);
  EXPECT_EQ(runtime.devices()[2].properties().total_memory_bytes, 2ull << 30);
}

TEST(PluginLoading, BadCpuReferenceConfigurationIsAnInitFailureNamingTheVariable) {
  test::ScopedEnv memory("H2_CPU_REFERENCE_MEMORY", "2XB");
  PluginInfo info = load_one("cpu-reference");
  EXPECT_EQ(info.state, PluginState::init_failed);
  EXPECT_THAT(info.message, HasSubstr("H2_CPU_REFERENCE_MEMORY='2XB'"));
  EXPECT_THAT(info.message, HasSubstr("unknown unit 'XB'"));
}

TEST(PluginLoading, DevicePropertiesCrossTheAbiIntact) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("fake").string()};
  Runtime runtime(options);
  ASSERT_TRUE(runtime.plugins()[0].loaded()) << runtime.plugins()[0].message;
  ASSERT_EQ(runtime.devices().size(), 2u);
  const DeviceProperties& p = runtime.devices()[1].properties();
  EXPECT_EQ(p.name, "fake device 1");
  EXPECT_EQ(p.vendor, "H2 tests");
  EXPECT_EQ(p.kind, DeviceKind::npu);
  EXPECT_EQ(p.total_memory_bytes, 2ull << 30);
  EXPECT_EQ(p.peak_flops.at(DType::bf16), 1e12);
  EXPECT_EQ(p.supported_dtypes, std::vector<DType>{DType::bf16});
}

TEST(PluginLoading, PluginLogLinesReachTheCoreLogger) {
  std::mutex mutex;
  std::vector<std::string> lines;
  set_log_level(LogLevel::info);
  set_log_sink([&](LogLevel, std::string_view source, std::string_view message) {
    std::lock_guard lock(mutex);
    lines.push_back(std::string(source) + ": " + std::string(message));
  });
  PluginInfo info = load_one(fake_plugin("fake").string());
  set_log_sink(nullptr);
  set_log_level(LogLevel::warning);
  EXPECT_TRUE(info.loaded());
  EXPECT_THAT(lines, testing::Contains("fake: fake plugin initialized"));
}

TEST(PluginLoading, MissingFileIsNotInstalled) {
  PluginInfo info = load_one("/nonexistent/dir/libh2-plugin-ghost.so");
  EXPECT_EQ(info.state, PluginState::not_installed);
  EXPECT_THAT(info.message, HasSubstr("no file at /nonexistent/dir/libh2-plugin-ghost.so"));
}

TEST(PluginLoading, UnknownNameIsNotInstalledAndNamesTheSearchPath) {
  PluginInfo info = load_one("ghost");
  EXPECT_EQ(info.state, PluginState::not_installed);
  EXPECT_THAT(info.message, HasSubstr("no libh2-plugin-ghost.so in the plugin search path"));
  EXPECT_THAT(info.message, HasSubstr("H2_PLUGIN_PATH"));

  // An empty search path (no installed plugins, no H2_PLUGIN_PATH): the message says so.
  RuntimeOptions options;
  options.plugins = {"ghost"};
  options.search_path = std::vector<std::filesystem::path>{};
  Runtime runtime(options);
  EXPECT_THAT(runtime.plugins().at(0).message,
              HasSubstr("in the plugin search path (empty: no installed plugin directory and no H2_PLUGIN_PATH"));
}

TEST(PluginLoading, TextFileIsNotASharedLibrary) {
  auto path = std::filesystem::temp_directory_path() / "libh2-plugin-text-test.so";
  std::ofstream(path) << "this is not an ELF file\n";
  PluginInfo info = load_one(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(info.state, PluginState::not_a_library);
  EXPECT_THAT(info.message, HasSubstr("not a shared library: " + path.string() + " has no ELF header"));
}

TEST(PluginLoading, TruncatedElfIsNotASharedLibrary) {
  auto path = std::filesystem::temp_directory_path() / "libh2-plugin-truncated-test.so";
  std::ofstream(path, std::ios::binary) << "\x7f"
                                           "ELF"
                                        << std::string(20, '\0');
  PluginInfo info = load_one(path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(info.state, PluginState::not_a_library);
  EXPECT_THAT(info.message, HasSubstr("not a shared library: the dynamic loader refused it"));
  EXPECT_THAT(info.message, HasSubstr("file too short"));
}

TEST(PluginLoading, UnresolvedSymbolIsALoadFailureNamingTheSymbol) {
  PluginInfo info = load_one(fake_plugin("undefined-symbol").string());
  EXPECT_EQ(info.state, PluginState::load_failed);
  EXPECT_THAT(info.message, HasSubstr("load failed: the dynamic loader refused it"));
  EXPECT_THAT(info.message, HasSubstr("undefined symbol: h2_test_symbol_nobody_defines"));
}

TEST(PluginLoading, LibraryWithoutEntryPointSaysSo) {
  PluginInfo info = load_one(fake_plugin("no-entry").string());
  EXPECT_EQ(info.state, PluginState::no_entry_point);
  EXPECT_THAT(info.message, HasSubstr("does not export h2_plugin_get_api"));
}

TEST(PluginLoading, OtherMajorIsAnAbiMismatchNamingBothVersions) {
  PluginInfo info = load_one(fake_plugin("abi-major").string());
  EXPECT_EQ(info.state, PluginState::abi_mismatch);
  EXPECT_EQ(info.abi_major, 2u);
  EXPECT_EQ(info.abi_minor, 3u);
  EXPECT_THAT(info.message, HasSubstr("ABI mismatch (plugin 2.3, core " + std::to_string(H2_ABI_MAJOR) + "." +
                                      std::to_string(H2_ABI_MINOR) + ")"));
}

TEST(PluginLoading, NewerMinorIsAnAbiMismatch) {
  PluginInfo info = load_one(fake_plugin("abi-minor-newer").string());
  EXPECT_EQ(info.state, PluginState::abi_mismatch);
  EXPECT_THAT(info.message, HasSubstr("plugin 1." + std::to_string(H2_ABI_MINOR + 1)));
  EXPECT_THAT(info.message, HasSubstr("newer H2 core"));
}

TEST(PluginLoading, TooSmallTableIsRejected) {
  PluginInfo info = load_one(fake_plugin("small-table").string());
  EXPECT_EQ(info.state, PluginState::invalid_table);
  // The fake plugin speaks this core's minor, whose table is the whole H2_PluginApi.
  EXPECT_THAT(info.message, HasSubstr("struct_size 64 is smaller than the " + std::to_string(sizeof(H2_PluginApi)) +
                                      " bytes ABI 1." + std::to_string(H2_ABI_MINOR) + " requires"));
}

TEST(PluginLoading, NullRequiredSlotIsRejected) {
  PluginInfo info = load_one(fake_plugin("null-slot").string());
  EXPECT_EQ(info.state, PluginState::invalid_table);
  EXPECT_THAT(info.message, HasSubstr("required slot 'memset_async' is NULL"));
}

TEST(PluginLoading, MemorySharingSlotsComeTogether) {
  PluginInfo info = load_one(fake_plugin("partial-sharing").string());
  EXPECT_EQ(info.state, PluginState::invalid_table);
  EXPECT_THAT(info.message, HasSubstr("mem_export, mem_import and mem_close must all be set or all be NULL"));
}

// A collective table (ABI 1.5) is all or nothing: a plugin offering part of its vendor's library,
// or a table older than the section, is refused when it loads rather than failing mid-job.
TEST(PluginLoading, ACollectiveTableMustHaveEverySlot) {
  PluginInfo partial = load_one(fake_plugin("collectives-partial").string());
  EXPECT_EQ(partial.state, PluginState::invalid_table);
  EXPECT_THAT(partial.message, HasSubstr("collective_table's slot 'comm_init_rank' is NULL (every slot is required)"));
  PluginInfo small = load_one(fake_plugin("collectives-small-table").string());
  EXPECT_EQ(small.state, PluginState::invalid_table);
  EXPECT_THAT(small.message,
              HasSubstr("collective_table struct_size 16 is smaller than the 120 bytes ABI 1.5 requires"));
}

// The size of the library's unique id (ABI 1.6): a 1.5 table, whose field was reserved0 and 0, means
// NCCL's 128 bytes; a 1.6 table must say it.
TEST(PluginLoading, ACollectiveTableSaysHowLongItsIdsAre) {
  PluginInfo old = load_one(fake_plugin("collectives-minor-5").string());
  EXPECT_EQ(old.state, PluginState::loaded) << old.message;
  PluginInfo unsized = load_one(fake_plugin("collectives-no-id-size").string());
  EXPECT_EQ(unsized.state, PluginState::invalid_table);
  EXPECT_THAT(unsized.message, HasSubstr("collective_table's unique_id_bytes is 0 (ABI 1.6 asks for the size of the "
                                         "library's id)"));
}

TEST(PluginLoading, InitFailureCarriesThePluginsMessage) {
  PluginInfo info = load_one(fake_plugin("init-fails").string());
  EXPECT_EQ(info.state, PluginState::init_failed);
  EXPECT_THAT(info.message, HasSubstr("init failed (device error): simulated driver failure"));
}

TEST(PluginLoading, MissingVendorRuntimeIsItsOwnState) {
  PluginInfo info = load_one(fake_plugin("runtime-missing").string());
  EXPECT_EQ(info.state, PluginState::runtime_missing);
  EXPECT_TRUE(info.unavailable());
  EXPECT_THAT(info.message, HasSubstr("vendor runtime missing: cannot load libh2-absent-vendor-runtime.so.1"));
}

TEST(PluginLoading, StreamOrderedAllocationSlotsComeTogether) {
  PluginInfo info = load_one(fake_plugin("partial-async").string());
  EXPECT_EQ(info.state, PluginState::invalid_table);
  EXPECT_THAT(info.message, HasSubstr("mem_alloc_async and mem_free_async must both be set or both be NULL"));
}

// A plugin built against ABI 1.3 has no stream-ordered slots: the caching allocator carves its
// buffers from mem_alloc segments and reuses them all the same.
TEST(PluginLoading, APluginWithoutStreamOrderedSlotsServesStreamOrderedBuffers) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("minor-3").string()};
  Runtime runtime(options);
  ASSERT_TRUE(runtime.plugins().at(0).loaded()) << runtime.plugins()[0].message;
  EXPECT_EQ(runtime.plugins()[0].abi_minor, 3u);
  Device device = runtime.devices().at(0);
  EXPECT_EQ(device.plugin_api().mem_alloc_async, nullptr);
  Stream stream = device.create_stream();
  void* first = nullptr;
  {
    DeviceBuffer buffer = device.allocate(64, stream);
    first = buffer.data();
    stream.memset(buffer, 7);
    uint8_t host[64] = {};
    stream.copy_to_host(host, buffer, sizeof host);
    stream.synchronize();
    EXPECT_EQ(host[63], 7);
  }
  DeviceBuffer again = device.allocate(64, stream);
  EXPECT_EQ(again.data(), first);
  const MemoryStats stats = memory_stats(device);
  EXPECT_EQ(stats.plugin_allocations, 1u);
  EXPECT_EQ(stats.cache_hits, 1u);
}

TEST(PluginLoading, PluginBuiltAgainstTheOldestMinorStillLoads) {
  PluginInfo info = load_one(fake_plugin("old-minor").string());
  EXPECT_TRUE(info.loaded()) << info.message;
  EXPECT_EQ(info.abi_minor, 0u);
}

TEST(PluginLoading, UnsupportedOptionalSlotIsReportedAsUnsupported) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("fake").string()};
  Runtime runtime(options);
  ASSERT_FALSE(runtime.devices().empty());
  try {
    runtime.devices()[0].memory_info();
    FAIL() << "mem_info is NULL in the fake plugin";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_UNSUPPORTED);
    EXPECT_THAT(e.what(), HasSubstr("fake does not support mem_info"));
  }
}

// The fake plugin has no stream_create_with_flags: a hint must not make stream creation fail.
TEST(PluginLoading, StreamHintsFallBackToAPlainStreamWithoutTheSlot) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("fake").string()};
  Runtime runtime(options);
  ASSERT_EQ(runtime.devices()[0].plugin_api().stream_create_with_flags, nullptr);
  Stream stream = runtime.devices()[0].create_stream({.host_inline = true});
  DeviceBuffer buffer = runtime.devices()[0].allocate(16);
  stream.memset(buffer, 3);
  uint8_t host[16] = {};
  stream.copy_to_host(host, buffer, sizeof host);
  stream.synchronize();
  EXPECT_EQ(host[15], 3);
}

TEST(PluginLoading, MemorySharingWithoutTheSlotsIsUnsupported) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("fake").string()};
  Runtime runtime(options);
  Device device = runtime.devices().at(0);
  EXPECT_FALSE(device.can_share_memory());
  DeviceBuffer buffer = device.allocate(64);
  try {
    device.export_memory(buffer);
    FAIL() << "the fake plugin cannot export memory";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_UNSUPPORTED);
    EXPECT_THAT(e.what(), HasSubstr("fake does not support mem_export"));
  }
}

TEST(PluginLoading, FailedCallNamesPluginCallAndReason) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("fake").string()};
  Runtime runtime(options);
  try {
    runtime.devices()[0].allocate(size_t{3} << 30);
    FAIL() << "the fake device has 1 GiB";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_OUT_OF_MEMORY);
    EXPECT_THAT(e.what(), HasSubstr("fake: mem_alloc(device 0, 3221225472 bytes): out of memory: the fake device is "
                                    "smaller than that"));
  }
}

TEST(PluginLoading, OperatorTableRules) {
  PluginInfo partial = load_one(fake_plugin("ops-partial").string());
  EXPECT_TRUE(partial.loaded()) << partial.message;
  PluginInfo no_capability = load_one(fake_plugin("ops-no-capability").string());
  EXPECT_EQ(no_capability.state, PluginState::invalid_table);
  EXPECT_THAT(no_capability.message, HasSubstr("op_table's required slot 'capability' is NULL"));
  PluginInfo small = load_one(fake_plugin("ops-small-table").string());
  EXPECT_EQ(small.state, PluginState::invalid_table);
  EXPECT_THAT(small.message, HasSubstr("op_table struct_size 16 is smaller than the"));
}

TEST(PluginLoading, AnOperatorThePluginLacksIsAnErrorNamingPluginAndOperator) {
  RuntimeOptions options;
  options.plugins = {fake_plugin("ops-partial").string()};
  Runtime runtime(options);
  Device device = runtime.devices().at(0);
  Stream stream = device.create_stream();
  Tensor y = Tensor::empty(device, {3}, DType::f32);
  ops::fill(stream, y, 2.5);  // the one operator it has
  EXPECT_EQ(y.to_host(stream), (std::vector<double>{2.5, 2.5, 2.5}));
  try {
    ops::softmax(stream, y, y);
    FAIL() << "softmax is not provided; there must be no fallback";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), H2_STATUS_UNSUPPORTED);
    EXPECT_THAT(e.what(), HasSubstr("softmax: plugin ops-partial does not provide this operator"));
  }
  // Its capability declares f32 only, and contiguous tensors only.
  EXPECT_THAT([&] { ops::fill(stream, Tensor::empty(device, {3}, DType::bf16), 1.0); },
              testing::ThrowsMessage<Error>(HasSubstr("fill: y is bf16[3] but plugin ops-partial supports f32")));
  EXPECT_THAT(
      [&] {
        ops::fill(stream, Tensor::empty(device, {2, 2}, DType::f32).transpose(0, 1), 1.0);
      },
      testing::ThrowsMessage<Error>(HasSubstr("fill: y is not contiguous and plugin ops-partial needs contiguous")));
}

TEST(PluginLoading, DiscoveryFindsEveryPluginInTheSearchPathAndReportsEachState) {
  RuntimeOptions options;
  options.search_path = std::vector<std::filesystem::path>{test::env_dir("H2_TEST_FAKE_PLUGIN_DIR")};
  Runtime runtime(options);
  std::map<std::string, PluginState> states;
  for (const PluginInfo& info : runtime.plugins()) states[info.name] = info.state;
  EXPECT_EQ(states["fake"], PluginState::loaded);
  EXPECT_EQ(states["old-minor"], PluginState::loaded);
  EXPECT_EQ(states["minor-3"], PluginState::loaded);
  EXPECT_EQ(states["abi-major"], PluginState::abi_mismatch);
  EXPECT_EQ(states["init-fails"], PluginState::init_failed);
  EXPECT_EQ(states["runtime-missing"], PluginState::runtime_missing);
  EXPECT_EQ(states["no-entry"], PluginState::no_entry_point);
  EXPECT_EQ(states["ops-partial"], PluginState::loaded);
  EXPECT_EQ(states["partial-async"], PluginState::invalid_table);
  EXPECT_EQ(states["collectives-minor-5"], PluginState::loaded);
  EXPECT_EQ(states["collectives-no-id-size"], PluginState::invalid_table);
  // Only loaded plugins contribute devices: fake, old-minor, minor-3, ops-partial and
  // collectives-minor-5, two each.
  EXPECT_EQ(runtime.devices().size(), 10u);
}

TEST(PluginLoading, TwoRuntimesShareOneInitializedPlugin) {
  Runtime first(test::cpu_reference_only());
  Runtime second(test::cpu_reference_only());
  ASSERT_TRUE(first.plugins()[0].loaded()) << first.plugins()[0].message;
  ASSERT_TRUE(second.plugins()[0].loaded()) << second.plugins()[0].message;
  EXPECT_TRUE(first.devices()[0] == second.devices()[0]);
}

TEST(PluginLoading, DevicesOutliveTheRuntime) {
  std::optional<Device> device;
  {
    Runtime runtime(test::cpu_reference_only());
    device = runtime.devices().at(0);
  }
  DeviceBuffer buffer = device->allocate(1024);
  Stream stream = device->create_stream();
  stream.memset(buffer, 7);
  stream.synchronize();
}

TEST(PluginLoading, DeviceLookupExplainsWhatIsWrong) {
  RuntimeOptions options;
  options.plugins = {"cpu-reference", fake_plugin("init-fails").string()};
  Runtime runtime(options);
  EXPECT_NO_THROW(runtime.device("cpu-reference", 0));
  EXPECT_THAT([&] { runtime.device("cpu-reference", 5); }, testing::ThrowsMessage<Error>(HasSubstr("has no device 5")));
  EXPECT_THAT([&] { runtime.device("init-fails", 0); },
              testing::ThrowsMessage<Error>(HasSubstr("'init-fails' is not usable: init failed")));
  EXPECT_THAT([&] { runtime.device("nothing", 0); },
              testing::ThrowsMessage<Error>(HasSubstr("no plugin named 'nothing'")));
}

}  // namespace
}  // namespace h2
