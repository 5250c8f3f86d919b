#include "devices_options.hpp"

#include <iostream>
#include <nlohmann/json.hpp>

#include "h2/runtime.hpp"
#include "table.hpp"

namespace h2::tools {

namespace {

using json = nlohmann::ordered_json;

// Why no key is listed, for a plugin whose listing was read: "" when there are keys.
std::string none_reason(const PluginOptionListing& listing) {
  if (!listing.options.empty()) return "";
  if (listing.listed) return listing.name + " takes no options";
  if (listing.abi_minor < 4)
    return listing.name + " speaks ABI 1." + std::to_string(listing.abi_minor) +
           ", which has no plugin options (they came in 1.4)";
  return listing.name + " does not list its options (no option_list)";
}

json listing_json(const PluginOptionListing& listing) {
  json options = json::array();
  for (const PluginOptionInfo& option : listing.options)
    options.push_back({{"key", option.key}, {"default", option.default_value}, {"description", option.description}});
  return {{"name", listing.name},
          {"path", listing.path.empty() ? json(nullptr) : json(listing.path)},
          {"error", listing.error.empty() ? json(nullptr) : json(listing.error)},
          {"listed", listing.listed},
          {"note", listing.error.empty() && listing.options.empty() ? json(none_reason(listing)) : json(nullptr)},
          {"options", options}};
}

void print_listing(const PluginOptionListing& listing) {
  if (!listing.error.empty()) {
    std::cout << listing.name << ": " << listing.error << "\n";
    return;
  }
  if (listing.options.empty()) {
    std::cout << none_reason(listing) << "\n";
    return;
  }
  std::cout << "Options of " << listing.name << " (" << listing.path << "), as --plugin-option " << listing.name
            << ":KEY=VALUE\n";
  Table table({"KEY", "DEFAULT", "DESCRIPTION"});
  for (const PluginOptionInfo& option : listing.options)
    table.add_row({option.key, option.default_value, option.description});
  table.print(std::cout);
}

}  // namespace

int run_devices_options(const std::vector<std::string>& plugins, bool json_output) {
  bool failed = false;
  json all = json::array();
  for (size_t i = 0; i < plugins.size(); ++i) {
    const PluginOptionListing listing = list_plugin_options(plugins[i]);
    failed = failed || !listing.error.empty();
    if (json_output) {
      all.push_back(listing_json(listing));
    } else {
      if (i > 0) std::cout << "\n";
      print_listing(listing);
    }
  }
  if (json_output) std::cout << json{{"plugins", all}}.dump(2) << "\n";
  return failed ? 1 : 0;
}

}  // namespace h2::tools
