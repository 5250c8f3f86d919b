// Helpers shared by the core's tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "h2/runtime.hpp"

namespace h2::test {

// A directory named by an environment variable that meson test sets; fails loudly when unset.
inline std::filesystem::path env_dir(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string(name) + " is not set; run the tests through meson test");
  return value;
}

inline std::filesystem::path fake_plugin(const std::string& name) {
  return env_dir("H2_TEST_FAKE_PLUGIN_DIR") / ("libh2-plugin-" + name + ".so");
}

// Sets an environment variable for the lifetime of the object, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The plugin a test of the runtime's semantics runs on: H2_TEST_PLUGIN, which meson test sets to run
// such a suite once per plugin (the Ascend plugin on its emulated CANN runtime), else cpu-reference.
inline std::string plugin_under_test() {
  const char* name = std::getenv("H2_TEST_PLUGIN");
  return name != nullptr && *name != '\0' ? name : "cpu-reference";
}

// A Runtime holding only that plugin.
inline RuntimeOptions plugin_under_test_only() {
  RuntimeOptions options;
  options.plugins = {plugin_under_test()};
  return options;
}

// A Runtime holding only the cpu-reference plugin.
inline RuntimeOptions cpu_reference_only() {
  RuntimeOptions options;
  options.plugins = {"cpu-reference"};
  return options;
}

}  // namespace h2::test
