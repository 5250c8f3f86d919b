// Where plugins are found: the search path, discovery of plugin files, and NAME-or-PATH lookup.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace h2::detail {

// libh2-plugin-NAME.so
std::string plugin_file_name(const std::string& name);
// The NAME of libh2-plugin-NAME.so, or nullopt for any other file name.
std::optional<std::string> plugin_name_from_file(const std::filesystem::path& path);

// Entries of a colon-separated list such as H2_PLUGIN_PATH (empty entries dropped).
std::vector<std::filesystem::path> split_search_path(const std::string& list);

// Plugin files in search-path order: directory entries contribute their libh2-plugin-*.so files in
// name order; file entries are taken as they are, even when missing (so a wrong path is reported).
// Directories that do not exist are logged and skipped.
std::vector<std::filesystem::path> discover_plugins(const std::vector<std::filesystem::path>& search_path);

// True when `spec` names a file ("./x.so", "/opt/x/libh2-plugin-y.so") rather than a plugin name.
bool looks_like_path(const std::string& spec);

// The file for plugin NAME: the first libh2-plugin-NAME.so in the search path, or nullopt.
std::optional<std::filesystem::path> find_plugin(const std::string& name,
                                                 const std::vector<std::filesystem::path>& search_path);

}  // namespace h2::detail
