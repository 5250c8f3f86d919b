#include "plugin_search.hpp"

#include <algorithm>
#include <system_error>

#include "h2/log.hpp"

namespace h2::detail {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kPrefix = "libh2-plugin-";
constexpr std::string_view kSuffix = ".so";
}  // namespace

std::string plugin_file_name(const std::string& name) {
  return std::string(kPrefix) + name + std::string(kSuffix);
}

std::optional<std::string> plugin_name_from_file(const fs::path& path) {
  const std::string file = path.filename().string();
  if (file.size() <= kPrefix.size() + kSuffix.size() || !file.starts_with(kPrefix) || !file.ends_with(kSuffix))
    return std::nullopt;
  return file.substr(kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
}

std::vector<fs::path> split_search_path(const std::string& list) {
  std::vector<fs::path> entries;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) entries.emplace_back(list.substr(start, end - start));
    start = end + 1;
  }
  return entries;
}

std::vector<fs::path> discover_plugins(const std::vector<fs::path>& search_path) {
  std::vector<fs::path> found;
  for (const fs::path& entry : search_path) {
    std::error_code ec;
    if (fs::is_directory(entry, ec)) {
      std::vector<fs::path> files;
      for (const auto& item : fs::directory_iterator(entry, ec))
        if (plugin_name_from_file(item.path())) files.push_back(item.path());
      std::sort(files.begin(), files.end());
      found.insert(found.end(), files.begin(), files.end());
    } else if (fs::exists(entry, ec) || entry.extension() == ".so") {
      found.push_back(entry);  // a file entry; a missing one is reported as "not installed"
    } else {
      log(LogLevel::warning, "core", "plugin search path entry " + entry.string() + " does not exist");
    }
  }
  return found;
}

bool looks_like_path(const std::string& spec) {
  return spec.find('/') != std::string::npos || spec.ends_with(".so");
}

std::optional<fs::path> find_plugin(const std::string& name, const std::vector<fs::path>& search_path) {
  for (const fs::path& entry : search_path) {
    std::error_code ec;
    if (fs::is_directory(entry, ec)) {
      fs::path candidate = entry / plugin_file_name(name);
      if (fs::exists(candidate, ec)) return candidate;
    } else if (plugin_name_from_file(entry) == name && fs::exists(entry, ec)) {
      return entry;
    }
  }
  return std::nullopt;
}

}  // namespace h2::detail
