// JSON forms of the suite's results: what children send their parent, and what report.json holds.
#pragma once

#include <nlohmann/json.hpp>

#include "h2/conformance.hpp"

namespace h2::conformance {

using Json = nlohmann::ordered_json;

Json to_json(const CaseResult& result);
CaseResult case_result_from_json(const Json& json);
Json to_json(const DeviceProperties& properties);
DeviceProperties device_properties_from_json(const Json& json);
Json to_json(const PluginDescription& plugin);
PluginDescription plugin_from_json(const Json& json);
Json to_json(const SuiteReport& report);

CaseState state_from_name(const std::string& name);

}  // namespace h2::conformance
