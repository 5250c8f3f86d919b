// The cpu-reference plugin's settings as plugin options (ABI 1.4) and as environment variables: each
// key has a variable, H2_CPU_REFERENCE_ and the key in capitals (memory: H2_CPU_REFERENCE_MEMORY).
// An option given at initialize overrides its variable: the option is what the caller (a tool, a
// program) chose for this run, the variable the user's standing default.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"

namespace h2::cpu_reference {

// Every key, with its description and default: what option_list returns.
const H2_OptionInfo* option_infos();
size_t option_count();

// "H2_CPU_REFERENCE_MEMORY" for "memory".
std::string option_variable(const std::string& key);

// Looks a variable up; returns nullopt when unset. Injected so tests need not touch the process
// environment.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// One setting's value and where it came from, so a bad value is reported where the user wrote it:
// "option memory" or "H2_CPU_REFERENCE_MEMORY".
struct Setting {
  std::string value;
  std::string origin;
};

// The value of `key`: the option when given, else its variable, else nullopt.
using SettingLookup = std::function<std::optional<Setting>(const std::string& key)>;
SettingLookup settings_from(std::map<std::string, std::string> options, EnvLookup env);

// One line for each option that overrides a variable set to another value, to log: a user whose
// variable no longer has an effect is told why.
std::vector<std::string> overridden_variables(const std::map<std::string, std::string>& options, const EnvLookup& env);

// The option_list slot.
H2_Status option_list(const H2_OptionInfo** infos, size_t* count);

}  // namespace h2::cpu_reference
