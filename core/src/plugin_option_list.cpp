// Listing a plugin's option keys (option_list, ABI 1.4) without initializing it: the keys matter
// most when initialize fails (a wrong value, no device here), so they must be readable then too.
#include <string>

#include "h2/runtime.hpp"
#include "plugin_loader.hpp"
#include "plugin_search.hpp"

namespace h2 {

namespace fs = std::filesystem;

namespace {

std::string text_or_empty(const char* text) {
  return text != nullptr ? text : "";
}

}  // namespace

PluginOptionListing list_plugin_options(const std::string& spec,
                                        const std::optional<std::vector<fs::path>>& search_path) {
  PluginOptionListing listing;
  listing.name = spec;
  fs::path path = spec;
  if (!detail::looks_like_path(spec)) {
    const std::vector<fs::path> where = search_path.value_or(Runtime::default_search_path());
    const std::optional<fs::path> found = detail::find_plugin(spec, where);
    if (!found) {
      listing.error = "no " + detail::plugin_file_name(spec) + " in the plugin search path";
      return listing;
    }
    path = *found;
  }
  listing.path = path.string();

  const detail::OpenedPlugin opened = detail::open_plugin(path);
  listing.name = opened.info.name;
  listing.abi_minor = opened.info.abi_minor;
  if (opened.table == nullptr) {
    listing.error = opened.info.message;
    return listing;
  }
  // Read the slot only where the plugin's table covers it: beyond struct_size lies another object.
  if (opened.table->struct_size < H2_PLUGIN_API_SIZE_1_4 || opened.table->option_list == nullptr) return listing;

  const H2_OptionInfo* infos = nullptr;
  size_t count = 0;
  if (opened.table->option_list(&infos, &count) != H2_STATUS_OK) {
    const char* message = opened.table->last_error != nullptr ? opened.table->last_error() : nullptr;
    listing.error = "option_list failed: " + text_or_empty(message);
    return listing;
  }
  listing.listed = true;
  if (count == 0) return listing;
  if (infos == nullptr || infos->struct_size < H2_OPTION_INFO_SIZE_1_4) {
    listing.error = "option_list returned " + std::to_string(count) + " keys but " +
                    (infos == nullptr ? std::string("a NULL array")
                                      : "elements of struct_size " + std::to_string(infos->struct_size) +
                                            ", smaller than ABI 1.4's " + std::to_string(H2_OPTION_INFO_SIZE_1_4));
    return listing;
  }
  for (size_t i = 0; i < count; ++i) {
    const H2_OptionInfo* info = H2_ARRAY_AT(H2_OptionInfo, infos, i);
    listing.options.push_back(
        {text_or_empty(info->key), text_or_empty(info->description), text_or_empty(info->default_value)});
  }
  return listing;
}

}  // namespace h2
