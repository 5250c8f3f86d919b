#include "serialize.hpp"

#include <cmath>
#include <limits>

namespace h2::conformance {

namespace {

// JSON has no infinity or NaN: write them as strings and read them back.
Json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double number_from(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  return s == "inf" ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
}

}  // namespace

const char* state_name(CaseState state) {
  switch (state) {
    case CaseState::pass: return "pass";
    case CaseState::fail: return "fail";
    case CaseState::not_supported: return "not-supported";
    case CaseState::waived: return "waived";
    case CaseState::crashed: return "crashed";
    case CaseState::timed_out: return "timed-out";
  }
  return "?";
}

CaseState state_from_name(const std::string& name) {
  for (CaseState s : {CaseState::pass, CaseState::fail, CaseState::not_supported, CaseState::waived, CaseState::crashed,
                      CaseState::timed_out})
    if (name == state_name(s)) return s;
  throw std::runtime_error("unknown case state '" + name + "'");
}

Json to_json(const CaseResult& r) {
  Json outputs = Json::array();
  for (const OutputError& e : r.outputs)
    outputs.push_back({{"name", e.name},
                       {"max_abs_error", number(e.max_abs_error)},
                       {"max_rel_error", number(e.max_rel_error)},
                       {"mismatch_fraction", number(e.mismatch_fraction)},
                       {"cosine_similarity", number(e.cosine_similarity)},
                       {"worst_ratio", number(e.worst_ratio)},
                       {"needed_atol", number(e.needed_atol)},
                       {"needed_rtol", number(e.needed_rtol)},
                       {"reference_max_abs_error", number(e.reference_max_abs_error)},
                       {"rounding_bias", number(e.rounding_bias)},
                       {"first_mismatch", e.first_mismatch}});
  return {{"op", r.op},           {"case", r.name},       {"dtype", r.dtype},  {"state", state_name(r.state)},
          {"message", r.message}, {"seconds", r.seconds}, {"outputs", outputs}};
}

CaseResult case_result_from_json(const Json& j) {
  CaseResult r;
  r.op = j.at("op").get<std::string>();
  r.name = j.at("case").get<std::string>();
  r.dtype = j.at("dtype").get<std::string>();
  r.state = state_from_name(j.at("state").get<std::string>());
  r.message = j.at("message").get<std::string>();
  r.seconds = j.at("seconds").get<double>();
  for (const Json& o : j.at("outputs")) {
    OutputError e;
    e.name = o.at("name").get<std::string>();
    e.max_abs_error = number_from(o.at("max_abs_error"));
    e.max_rel_error = number_from(o.at("max_rel_error"));
    e.mismatch_fraction = number_from(o.at("mismatch_fraction"));
    e.cosine_similarity = number_from(o.at("cosine_similarity"));
    e.worst_ratio = number_from(o.at("worst_ratio"));
    e.needed_atol = number_from(o.at("needed_atol"));
    e.needed_rtol = number_from(o.at("needed_rtol"));
    e.reference_max_abs_error = number_from(o.at("reference_max_abs_error"));
    e.rounding_bias = number_from(o.value("rounding_bias", Json(0.0)));
    e.first_mismatch = o.at("first_mismatch").get<std::string>();
    r.outputs.push_back(e);
  }
  return r;
}

Json to_json(const DeviceProperties& p) {
  Json peak = Json::object();
  for (const auto& [dtype, flops] : p.peak_flops) peak[std::string(dtype_name(dtype))] = flops;
  Json dtypes = Json::array();
  for (DType d : p.supported_dtypes) dtypes.push_back(std::string(dtype_name(d)));
  return {{"name", p.name},
          {"vendor", p.vendor},
          {"bus_id", p.bus_id},
          {"kind", std::string(device_kind_name(p.kind))},
          {"compute_units", p.compute_units},
          {"total_memory_bytes", p.total_memory_bytes},
          {"memory_bandwidth_bytes_per_s", p.memory_bandwidth_bytes_per_s},
          {"peak_flops", peak},
          {"supported_dtypes", dtypes},
          {"nic_direct", {{"host", p.nic_direct_host}, {"cuda", p.nic_direct_cuda}, {"dmabuf", p.nic_direct_dmabuf}}},
          {"host_accessible", p.host_accessible}};
}

DeviceProperties device_properties_from_json(const Json& j) {
  DeviceProperties p;
  p.name = j.at("name").get<std::string>();
  p.vendor = j.at("vendor").get<std::string>();
  p.bus_id = j.at("bus_id").get<std::string>();
  const std::string kind = j.at("kind").get<std::string>();
  for (DeviceKind k : {DeviceKind::cpu, DeviceKind::gpu, DeviceKind::npu})
    if (kind == device_kind_name(k)) p.kind = k;
  p.compute_units = j.at("compute_units").get<uint32_t>();
  p.total_memory_bytes = j.at("total_memory_bytes").get<uint64_t>();
  p.memory_bandwidth_bytes_per_s = j.at("memory_bandwidth_bytes_per_s").get<double>();
  for (const auto& [name, flops] : j.at("peak_flops").items())
    if (auto d = dtype_from_name(name)) p.peak_flops[*d] = flops.get<double>();
  for (const Json& name : j.at("supported_dtypes"))
    if (auto d = dtype_from_name(name.get<std::string>())) p.supported_dtypes.push_back(*d);
  p.nic_direct_host = j.at("nic_direct").at("host").get<bool>();
  p.nic_direct_cuda = j.at("nic_direct").at("cuda").get<bool>();
  p.nic_direct_dmabuf = j.at("nic_direct").at("dmabuf").get<bool>();
  p.host_accessible = j.at("host_accessible").get<bool>();
  return p;
}

Json to_json(const PluginDescription& d) {
  return {{"name", d.name},
          {"version", d.version},
          {"path", d.path},
          {"sha256", d.sha256},
          {"abi", std::to_string(d.abi_major) + "." + std::to_string(d.abi_minor)},
          {"device", d.device},
          {"device_properties", to_json(d.properties)}};
}

PluginDescription plugin_from_json(const Json& j) {
  PluginDescription d;
  d.name = j.at("name").get<std::string>();
  d.version = j.at("version").get<std::string>();
  d.path = j.at("path").get<std::string>();
  d.sha256 = j.at("sha256").get<std::string>();
  const std::string abi = j.at("abi").get<std::string>();
  d.abi_major = static_cast<uint32_t>(std::stoul(abi.substr(0, abi.find('.'))));
  d.abi_minor = static_cast<uint32_t>(std::stoul(abi.substr(abi.find('.') + 1)));
  d.device = j.at("device").get<int>();
  d.properties = device_properties_from_json(j.at("device_properties"));
  return d;
}

Json to_json(const SuiteReport& report) {
  Json cases = Json::array();
  for (const CaseResult& r : report.cases) cases.push_back(to_json(r));
  Json totals = Json::object();
  for (CaseState s : {CaseState::pass, CaseState::fail, CaseState::not_supported, CaseState::waived, CaseState::crashed,
                      CaseState::timed_out})
    totals[state_name(s)] = report.count(s);
  return {{"suite_version", report.suite_version},
          {"mode", report.mode == Mode::full ? "full" : "quick"},
          {"date", report.date},
          {"plugin", to_json(report.plugin)},
          {"passed", report.passed()},
          {"totals", totals},
          {"cases", cases}};
}

}  // namespace h2::conformance
