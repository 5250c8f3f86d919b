#include "plugin_options.hpp"

#include "plugin_error.hpp"

namespace h2::plugin {

namespace {

std::string known_keys(const H2_OptionInfo* known, size_t known_count) {
  if (known_count == 0) return "it takes no options";
  std::string list = "its keys are ";
  for (size_t i = 0; i < known_count; ++i) list += (i ? ", " : "") + std::string(known[i].key);
  return list;
}

bool is_known(const std::string& key, const H2_OptionInfo* known, size_t known_count) {
  for (size_t i = 0; i < known_count; ++i)
    if (key == known[i].key) return true;
  return false;
}

}  // namespace

std::map<std::string, std::string> read_init_options(const H2_InitArgs& args, const H2_OptionInfo* known,
                                                     size_t known_count, const std::string& plugin) {
  std::map<std::string, std::string> options;
  if (args.struct_size < H2_INIT_ARGS_SIZE_1_4 || args.option_count == 0) return options;
  if (args.options == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, "args->options is NULL but option_count is not 0");
  if (args.options->struct_size < H2_OPTION_SIZE_1_4)
    fail(H2_STATUS_INVALID_ARGUMENT, "H2_Option struct_size " + std::to_string(args.options->struct_size) +
                                         " is smaller than ABI 1.4's " + std::to_string(H2_OPTION_SIZE_1_4));
  for (size_t i = 0; i < args.option_count; ++i) {
    const H2_Option* option = H2_ARRAY_AT(H2_Option, args.options, i);
    if (option->key == nullptr || *option->key == '\0')
      fail(H2_STATUS_INVALID_ARGUMENT, "option " + std::to_string(i) + " has no key");
    const std::string key = option->key;
    if (option->value == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, "option '" + key + "' has a NULL value");
    if (!is_known(key, known, known_count))
      fail(H2_STATUS_INVALID_ARGUMENT,
           "unknown option '" + key + "' for plugin " + plugin + ": " + known_keys(known, known_count));
    if (!options.emplace(key, option->value).second)
      fail(H2_STATUS_INVALID_ARGUMENT, "option '" + key + "' is given twice");
  }
  return options;
}

}  // namespace h2::plugin
