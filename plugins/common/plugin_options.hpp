// The plugin options of H2_InitArgs (ABI 1.4), read and checked the same way by every plugin of this
// repository: a key the plugin does not document is an error that lists the keys it does, never a
// setting dropped in silence.
#pragma once

#include <cstddef>
#include <map>
#include <string>

#include "h2/plugin_abi.h"

namespace h2::plugin {

// `args`' options as key -> value. `known` (`known_count` entries, a plugin's option_list array)
// are the keys the plugin accepts. Throws PluginError(H2_STATUS_INVALID_ARGUMENT) naming `plugin`
// for a key not in `known` (listing them), a key given twice, a NULL or empty key, a NULL value and
// an H2_Option whose struct_size is too small. Arguments of a 1.0-1.3 core (struct_size below
// H2_INIT_ARGS_SIZE_1_4) carry no options: the map is empty.
std::map<std::string, std::string> read_init_options(const H2_InitArgs& args, const H2_OptionInfo* known,
                                                     size_t known_count, const std::string& plugin);

}  // namespace h2::plugin
