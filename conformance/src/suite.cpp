// The suite's driver: probes the plugin, then runs each operator's cases in a child process of its
// own, collects results (crashes and hangs included), applies waivers and dates the report.
#include <fnmatch.h>

#include <chrono>
#include <ctime>
#include <map>
#include <optional>

#include "case_runner.hpp"
#include "cases.hpp"
#include "h2/child_process.hpp"
#include "h2/error.hpp"
#include "h2/op_registry.hpp"
#include "serialize.hpp"
#include "waivers.hpp"

namespace h2::conformance {

namespace {

bool selected(const std::vector<std::string>& patterns, const std::string& op) {
  if (patterns.empty()) return true;
  for (const std::string& p : patterns)
    if (fnmatch(p.c_str(), op.c_str(), 0) == 0) return true;
  return false;
}

std::string utc(const char* format) {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[64];
  std::strftime(text, sizeof text, format, &tm);
  return text;
}

// The plugin under test and the reference, loaded in the current process.
struct Loaded {
  std::unique_ptr<Runtime> runtime;
  std::optional<Devices> devices;
};

Loaded load(const SuiteOptions& options) {
  Loaded loaded;
  RuntimeOptions runtime_options;
  runtime_options.plugins = {options.plugin};
  if (options.plugin != "cpu-reference") runtime_options.plugins.push_back("cpu-reference");
  // Isolated runs load plugins in a child of their own already (run_in_child): no second probe.
  if (options.isolate) runtime_options.probe_timeout_seconds = 0;
  loaded.runtime = std::make_unique<Runtime>(runtime_options);
  const PluginInfo& info = loaded.runtime->plugins().at(0);
  if (!info.loaded()) throw Error(H2_STATUS_INVALID_ARGUMENT, "plugin " + options.plugin + ": " + info.message);
  // Devices are found by plugin name: a plugin file that calls itself cpu-reference (a fork or
  // another build of it) would be compared with itself, or stand in for the reference, and pass.
  if (options.plugin != "cpu-reference" && info.name == "cpu-reference")
    throw Error(H2_STATUS_INVALID_ARGUMENT,
                "plugin " + options.plugin +
                    " calls itself 'cpu-reference', the name of the reference plugin it is compared with: give it a "
                    "name of its own (plugin_name in its H2_PluginApi table)");
  const PluginInfo* reference = nullptr;
  for (const PluginInfo& p : loaded.runtime->plugins())
    if (p.name == "cpu-reference" && p.loaded()) reference = &p;
  if (reference == nullptr)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "the cpu-reference plugin, which defines the right answers, is not usable");
  const Device plugin = loaded.runtime->device(info.name, options.device);
  loaded.devices = Devices{plugin, loaded.runtime->device("cpu-reference", 0),
                           std::make_shared<DeviceBuffer>(plugin.allocate(kDelayBytes))};
  return loaded;
}

// What the plugin is and which operators and dtypes it declares.
struct Probe {
  PluginDescription plugin;
  std::map<std::string, std::vector<std::string>> dtypes;  // operator -> dtype names; absent: not provided
};

Json probe_json(const SuiteOptions& options) {
  Loaded loaded = load(options);
  const Device& device = loaded.devices->plugin;
  const PluginInfo& info = loaded.runtime->plugins().at(0);
  PluginDescription d{info.name,      info.version,   info.path,      sha256_file(info.path),
                      info.abi_major, info.abi_minor, options.device, device.properties()};
  Json dtypes = Json::object();
  for (H2_Op id : all_ops()) {
    const std::string name(op_name(id));
    if (auto capability = device.op_capability(id)) {
      Json list = Json::array();
      for (DType dtype : capability->dtypes) list.push_back(std::string(dtype_name(dtype)));
      dtypes[name] = list;
    }
  }
  return {{"event", "probe"}, {"plugin", to_json(d)}, {"dtypes", dtypes}};
}

Probe parse_probe(const Json& j) {
  Probe p;
  p.plugin = plugin_from_json(j.at("plugin"));
  for (const auto& [op, list] : j.at("dtypes").items()) p.dtypes[op] = list.get<std::vector<std::string>>();
  return p;
}

// One operator's work: its numeric cases and behaviour checks, as indices into the case list.
struct Group {
  std::string op;
  std::vector<const Case*> cases;
  std::vector<const BehaviourCheck*> behaviours;
  size_t size() const { return cases.size() + behaviours.size(); }
  std::string name_of(size_t i) const {
    return i < cases.size() ? std::string(dtype_name(cases[i]->dtype)) + " " + cases[i]->name
                            : behaviours[i - cases.size()]->name;
  }
};

// Runs a group in this process, reporting through `emit` as a child would.
void run_group(const Group& group, const Devices& devices, const std::function<void(const std::string&)>& emit) {
  for (size_t i = 0; i < group.size(); ++i) {
    emit(Json{{"event", "start"}, {"index", i}}.dump());
    const CaseResult r = i < group.cases.size() ? run_case(*group.cases[i], devices)
                                                : run_behaviour(*group.behaviours[i - group.cases.size()], devices);
    emit(Json{{"event", "result"}, {"index", i}, {"result", to_json(r)}}.dump());
  }
}

CaseResult unfinished(const Group& group, size_t i, CaseState state, const std::string& message) {
  CaseResult r;
  r.op = group.op;
  if (i < group.cases.size()) {
    r.name = group.cases[i]->name;
    r.dtype = std::string(dtype_name(group.cases[i]->dtype));
  } else {
    r.name = group.behaviours[i - group.cases.size()]->name;
    r.dtype = "-";
  }
  r.state = state;
  r.message = message;
  return r;
}

// Turns what a child said (and how it ended) into one result per case of the group.
// A child's exception, as the event line `collect` and the probe read.
std::string error_event(const std::string& message) {
  return Json{{"event", "error"}, {"message", message}}.dump();
}

std::vector<CaseResult> collect(const Group& group, const ChildOutcome& outcome, double timeout) {
  std::vector<std::optional<CaseResult>> results(group.size());
  constexpr size_t kNone = static_cast<size_t>(-1);
  size_t running = kNone;  // the case that started and has no result yet
  std::string child_error;
  for (const std::string& line : outcome.lines) {
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception&) {
      continue;  // not ours
    }
    const std::string event = j.value("event", "");
    if (event == "start") running = j.at("index").get<size_t>();
    if (event == "result") {
      results.at(j.at("index").get<size_t>()) = case_result_from_json(j.at("result"));
      running = kNone;
    }
    if (event == "error") child_error = j.value("message", "");
  }
  const bool died = outcome.timed_out || !outcome.signal.empty() || (outcome.exited && outcome.exit_code != 0);
  const CaseState state = outcome.timed_out ? CaseState::timed_out : CaseState::crashed;
  std::string how = outcome.timed_out ? "did not finish within " + std::to_string(static_cast<int>(timeout)) + " s"
                    : !outcome.signal.empty() ? "crashed with " + outcome.signal
                                              : "exited with code " + std::to_string(outcome.exit_code);
  if (!child_error.empty()) how += ": " + child_error;
  std::vector<CaseResult> out;
  for (size_t i = 0; i < group.size(); ++i) {
    if (results[i]) {
      out.push_back(*results[i]);
    } else if (died && running == i) {
      out.push_back(unfinished(group, i, state, group.op + " " + how + " in this case"));
    } else {
      out.push_back(unfinished(group, i, died ? state : CaseState::crashed,
                               "not run: the operator's process " + how +
                                   (running != kNone ? " in " + group.name_of(running) : std::string())));
    }
  }
  return out;
}

}  // namespace

SuiteReport run_suite(const SuiteOptions& options) {
  const std::vector<DType> dtypes =
      options.dtypes.empty() ? std::vector<DType>{DType::f32, DType::f16, DType::bf16} : options.dtypes;
  const CaseList list = build_cases(options.mode, dtypes);
  const std::vector<Waiver> waivers =
      load_waivers(options.waiver_file.empty() ? default_waiver_file() : options.waiver_file);

  // ---- Probe: load the plugin once, in a child, to learn what it is and what it declares ----
  Probe probe;
  std::optional<Loaded> in_process;
  if (options.isolate) {
    const ChildOutcome outcome = run_in_child([&](const auto& emit) { emit(probe_json(options).dump()); },
                                              options.op_timeout_seconds, error_event);
    std::optional<Json> answer;
    std::string error = outcome.timed_out         ? "loading it did not finish in time"
                        : !outcome.signal.empty() ? "loading it crashed with " + outcome.signal
                                                  : "loading it failed";
    for (const std::string& line : outcome.lines) {
      Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      if (j.value("event", "") == "probe") answer = j;
      if (j.value("event", "") == "error") error = j.value("message", error);
    }
    if (!answer) throw Error(H2_STATUS_INVALID_ARGUMENT, error);
    probe = parse_probe(*answer);
  } else {
    in_process = load(options);
    probe = parse_probe(probe_json(options));
  }

  // ---- Group the selected cases by operator ----
  std::vector<Group> groups;
  auto group_for = [&](const std::string& op) -> Group& {
    for (Group& g : groups)
      if (g.op == op) return g;
    groups.push_back({op, {}, {}});
    return groups.back();
  };
  SuiteReport report;
  report.mode = options.mode;
  report.plugin = probe.plugin;
  for (const Case& c : list.cases) {
    if (!selected(options.ops, c.op)) continue;
    const auto declared = probe.dtypes.find(c.op);
    const std::string dtype(dtype_name(c.dtype));
    if (declared == probe.dtypes.end() ||
        std::find(declared->second.begin(), declared->second.end(), dtype) == declared->second.end()) {
      report.cases.push_back({.op = c.op,
                              .name = c.name,
                              .dtype = dtype,
                              .state = CaseState::not_supported,
                              .message = declared == probe.dtypes.end() ? "the plugin does not provide " + c.op
                                                                        : "its capability does not list " + dtype});
      continue;
    }
    group_for(c.op).cases.push_back(&c);
  }
  for (const BehaviourCheck& b : list.behaviours)
    if (selected(options.ops, b.op)) group_for(b.op).behaviours.push_back(&b);

  // ---- Run each operator in its own process ----
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& group = groups[g];
    std::vector<CaseResult> results;
    if (options.isolate) {
      const ChildOutcome outcome = run_in_child(
          [&](const auto& emit) {
            Loaded loaded = load(options);
            run_group(group, *loaded.devices, emit);
          },
          options.op_timeout_seconds, error_event);
      results = collect(group, outcome, options.op_timeout_seconds);
    } else {
      ChildOutcome outcome;
      outcome.exited = true;
      run_group(group, *in_process->devices, [&](const std::string& line) { outcome.lines.push_back(line); });
      results = collect(group, outcome, options.op_timeout_seconds);
    }
    report.cases.insert(report.cases.end(), results.begin(), results.end());
    if (options.progress) options.progress(g + 1, groups.size(), group.op);
  }

  // Keep the report in the suite's operator order.
  const std::vector<std::string> order = operator_names();
  auto rank = [&](const std::string& op) { return std::find(order.begin(), order.end(), op) - order.begin(); };
  std::stable_sort(report.cases.begin(), report.cases.end(),
                   [&](const CaseResult& a, const CaseResult& b) { return rank(a.op) < rank(b.op); });
  apply_waivers(report.cases, report.plugin.name, waivers, utc("%Y-%m-%d"));
  report.date = utc("%Y-%m-%dT%H:%M:%SZ");
  return report;
}

}  // namespace h2::conformance
