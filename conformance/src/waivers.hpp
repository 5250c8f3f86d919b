// The suite's one waiver file: the only way a failing case may be accepted, each entry reviewed in
// the repository with a reason and an expiry date. A waived case is reported as "waived", never as
// a pass; an expired entry no longer applies.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "h2/conformance.hpp"

namespace h2::conformance {

struct Waiver {
  std::string plugin, op, dtype, case_pattern;  // glob patterns ("*" matches all)
  std::string reason;
  std::string expires;  // YYYY-MM-DD, inclusive
};

// Throws h2::Error naming the file, the entry and the field when the file is malformed.
std::vector<Waiver> load_waivers(const std::filesystem::path& file);

// The file the suite uses by default: waivers.json of the source tree, or of the installation.
std::filesystem::path default_waiver_file();

// Marks failed, crashed and timed-out cases covered by a waiver that has not expired on `today`
// (YYYY-MM-DD) as waived, appending the reason to their message.
void apply_waivers(std::vector<CaseResult>& cases, const std::string& plugin, const std::vector<Waiver>& waivers,
                   const std::string& today);

}  // namespace h2::conformance
