#include "waivers.hpp"

#include <fnmatch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "h2/error.hpp"

namespace h2::conformance {

namespace {

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
  throw Error(H2_STATUS_INVALID_ARGUMENT, "waiver file " + file.string() + ": " + what);
}

bool matches(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

std::filesystem::path default_waiver_file() {
  const std::filesystem::path source = H2_WAIVER_FILE_SOURCE;
  if (std::filesystem::exists(source)) return source;
  return H2_WAIVER_FILE_INSTALLED;
}

std::vector<Waiver> load_waivers(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) bad(file, "cannot be read");
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // a parse error, or a number beyond a double
    bad(file, std::string("is not valid JSON: ") + e.what());
  }
  if (!json.is_object() || !json.contains("waivers") || !json["waivers"].is_array())
    bad(file, "must be an object with a \"waivers\" array");
  std::vector<Waiver> waivers;
  const std::regex date(R"(\d{4}-\d{2}-\d{2})");
  size_t index = 0;
  for (const auto& entry : json["waivers"]) {
    const std::string where = "entry " + std::to_string(index++);
    auto field = [&](const char* name) -> std::string {
      if (!entry.contains(name) || !entry[name].is_string() || entry[name].get<std::string>().empty())
        bad(file, where + ": \"" + name + "\" must be a non-empty string");
      return entry[name].get<std::string>();
    };
    Waiver w{field("plugin"), field("op"), field("dtype"), field("case"), field("reason"), field("expires")};
    if (!std::regex_match(w.expires, date))
      bad(file, where + ": \"expires\" must be a date YYYY-MM-DD, not " + w.expires);
    waivers.push_back(w);
  }
  return waivers;
}

void apply_waivers(std::vector<CaseResult>& cases, const std::string& plugin, const std::vector<Waiver>& waivers,
                   const std::string& today) {
  for (CaseResult& r : cases) {
    if (r.state != CaseState::fail && r.state != CaseState::crashed && r.state != CaseState::timed_out) continue;
    for (const Waiver& w : waivers) {
      if (!matches(w.plugin, plugin) || !matches(w.op, r.op) || !matches(w.dtype, r.dtype) ||
          !matches(w.case_pattern, r.name))
        continue;
      if (w.expires < today) {
        r.message += " [a waiver for this expired on " + w.expires + "]";
        continue;
      }
      r.message = std::string(state_name(r.state)) + " but waived until " + w.expires + ": " + w.reason + " (" +
                  r.message + ")";
      r.state = CaseState::waived;
      break;
    }
  }
}

}  // namespace h2::conformance
