#include "vendor_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "plugin_error.hpp"

namespace h2::plugin {

namespace {

std::string loader_error() {
  const char* text = dlerror();
  return text != nullptr ? text : "unknown dlopen error";
}

}  // namespace

VendorLibrary::VendorLibrary(const VendorSearch& search) {
  std::string looked;
  // The homes the variables name, then the vendor's default install location (when no variable is set).
  std::vector<std::pair<std::string, std::string>> homes;  // directory, where it came from
  for (const std::string& variable : search.home_variables)
    if (const char* home = std::getenv(variable.c_str()); home != nullptr && *home != '\0')
      homes.emplace_back(home, variable);
  if (homes.empty() && !search.default_home.empty()) homes.emplace_back(search.default_home, "default");
  for (const auto& [home, origin] : homes) {
    for (const std::string& subdirectory : search.subdirectories) {
      const std::filesystem::path candidate = std::filesystem::path(home) / subdirectory / search.file;
      looked += (looked.empty() ? "" : ", ") + candidate.parent_path().string() + " (" + origin + ")";
      std::error_code error;
      if (!std::filesystem::exists(candidate, error)) continue;
      handle_ = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle_ == nullptr)
        fail(H2_STATUS_RUNTIME_MISSING, "vendor runtime missing: " + candidate.string() +
                                            " cannot be loaded: " + loader_error() + "; " + search.install_hint);
      path_ = candidate.string();
      return;
    }
  }
  // The loader's own search: LD_LIBRARY_PATH, the cache, the default directories.
  handle_ = dlopen(search.file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ != nullptr) {
    path_ = search.file;
    return;
  }
  const std::string why = loader_error();
  const bool absent = why.find("No such file") != std::string::npos;
  fail(H2_STATUS_RUNTIME_MISSING,
       "vendor runtime missing: " + search.file + (absent ? " was not found" : " cannot be loaded: " + why) +
           " (looked in " + (looked.empty() ? "" : looked + " and ") + "the library path); " + search.install_hint);
}

VendorLibrary::~VendorLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

VendorLibrary::VendorLibrary(VendorLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

void* VendorLibrary::symbol(const char* name) const {
  dlerror();  // clear: a NULL symbol is legal, so the error text decides
  void* address = dlsym(handle_, name);
  if (address == nullptr)
    fail(H2_STATUS_RUNTIME_MISSING, "vendor runtime " + path_ + " has no function " + name +
                                        " (a runtime older than this plugin needs?): " + loader_error());
  return address;
}

void* VendorLibrary::optional_symbol(const char* name) const {
  return dlsym(handle_, name);
}

}  // namespace h2::plugin
