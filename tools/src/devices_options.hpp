// `h2 devices --plugin NAME --options`: the option keys a plugin documents (ABI 1.4 option_list), read
// without initializing it, so they can be looked up when its hardware is missing or an option is wrong.
#pragma once

#include <string>
#include <vector>

namespace h2::tools {

// Lists each plugin's keys (key, default, description) as a table, or as JSON; returns 0 when every
// plugin's list could be read (a plugin that lists none, or predates option_list, says so and is not
// an error), 1 otherwise.
int run_devices_options(const std::vector<std::string>& plugins, bool json);

}  // namespace h2::tools
