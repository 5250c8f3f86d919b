// A vendor runtime loaded at run time with dlopen, so that a plugin builds without the vendor's
// SDK, loads on machines without it, and says plainly what is missing (H2_STATUS_RUNTIME_MISSING
// from initialize) instead of failing to load. The Ascend plugin opens libascendcl.so and aclnn's
// libraries this way, the MLU plugin libcnrt.so and libcnnl.so; every function a plugin uses is
// resolved by name, so a runtime older than the plugin needs is named too.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "h2/plugin_abi.h"

namespace h2::plugin {

struct VendorSearch {
  std::string file;                         // "libascendcl.so"
  std::vector<std::string> home_variables;  // tried in order: "ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"
  std::vector<std::string> subdirectories;  // of each home: "lib64", "lib"
  std::string install_hint;                 // "install the CANN toolkit and source its set_env.sh"
  std::string default_home = {};            // tried when no variable is set: "/usr/local/neuware"
};

class VendorLibrary {
 public:
  // Looks in each subdirectory of each home that is set (or of the default home when none is), then on
  // the dynamic loader's own search
  // path (LD_LIBRARY_PATH, the cache). Throws PluginError(RUNTIME_MISSING): "<file> was not found
  // (looked in ...); <hint>", or with dlerror's text when a file is there but cannot be loaded.
  explicit VendorLibrary(const VendorSearch& search);
  ~VendorLibrary();
  VendorLibrary(VendorLibrary&& other) noexcept;
  VendorLibrary& operator=(VendorLibrary&&) = delete;
  VendorLibrary(const VendorLibrary&) = delete;
  VendorLibrary& operator=(const VendorLibrary&) = delete;

  // The function `name` as `Fn` (a function pointer type). Throws PluginError(RUNTIME_MISSING)
  // naming the symbol and the library when it lacks it (a runtime older than the plugin needs).
  template <typename Fn>
  Fn function(const char* name) const {
    return reinterpret_cast<Fn>(symbol(name));
  }
  // The function `name`, or NULL when the library lacks it: for functions newer than the oldest
  // runtime the plugin supports, whose absence only turns a feature off.
  template <typename Fn>
  Fn optional_function(const char* name) const {
    return reinterpret_cast<Fn>(optional_symbol(name));
  }
  // Where it was loaded from: the file found in a home, or the name the loader resolved.
  const std::string& path() const { return path_; }
  // " (emulated)" where the file is one of H2's test emulators (plugins/<vendor>/emulator, which
  // export h2_emulated_library), else "": for the library names a plugin reports, so that `h2
  // devices` and DiComm's logs never pass an emulation off as the vendor's library.
  std::string emulated_suffix() const { return optional_symbol("h2_emulated_library") != nullptr ? " (emulated)" : ""; }

 private:
  void* symbol(const char* name) const;
  void* optional_symbol(const char* name) const;

  void* handle_ = nullptr;
  std::string path_;
};

// A vendor library a plugin can do without (NCCL, HCCL, CNCL: the collective section is offered only
// where it loads): opened at the first call and never closed, since such libraries start threads and
// exit handlers of their own. `bind` resolves its functions into a `Library` (it may throw PluginError
// to refuse one, too old say). Returns nullptr where the library is missing or refused, and then
// `why` says which. Later calls return the first call's answer.
template <typename Library>
const Library* optional_library(const VendorSearch& search,
                                const std::function<void(const VendorLibrary&, Library&)>& bind,
                                std::string* why = nullptr);

// What the collective sections (CUDA's NCCL, Ascend's HCCL, MLU's CNCL) build on their library,
// `load` being the plugin's optional_library wrapper:
// - the loaded library for a call that cannot run without it, else PluginError(RUNTIME_MISSING)
//   with why it is missing;
template <typename Library>
const Library& required_library(const Library* (*load)(std::string* why));
// - the section's table, `make` applied to the library once, or nullptr where it is missing (the
//   plugin then offers no collective section).
template <typename Library>
const H2_CollectiveTable* collective_table_of(const Library* (*load)(std::string* why),
                                              H2_CollectiveTable (*make)(const Library&));

}  // namespace h2::plugin

#include "plugin_error.hpp"

namespace h2::plugin {

template <typename Library>
const Library* optional_library(const VendorSearch& search,
                                const std::function<void(const VendorLibrary&, Library&)>& bind, std::string* why) {
  struct Loaded {
    std::unique_ptr<VendorLibrary> file;
    std::unique_ptr<Library> library;
    std::string why;
  };
  static const Loaded& loaded = *new Loaded([&] {
    Loaded attempt;
    try {
      attempt.file = std::make_unique<VendorLibrary>(search);
      auto library = std::make_unique<Library>();
      bind(*attempt.file, *library);
      attempt.library = std::move(library);
    } catch (const PluginError& e) {
      attempt.why = e.what();
    }
    return attempt;
  }());
  if (why != nullptr) *why = loaded.why;
  return loaded.library.get();
}

template <typename Library>
const Library& required_library(const Library* (*load)(std::string* why)) {
  std::string why;
  const Library* loaded = load(&why);
  if (loaded == nullptr) fail(H2_STATUS_RUNTIME_MISSING, why);
  return *loaded;
}

template <typename Library>
const H2_CollectiveTable* collective_table_of(const Library* (*load)(std::string* why),
                                              H2_CollectiveTable (*make)(const Library&)) {
  static const H2_CollectiveTable* table = [&]() -> const H2_CollectiveTable* {
    const Library* loaded = load(nullptr);
    return loaded != nullptr ? new H2_CollectiveTable(make(*loaded)) : nullptr;  // lives as long as the plugin
  }();
  return table;
}

}  // namespace h2::plugin
