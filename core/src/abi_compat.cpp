#include "abi_compat.hpp"

#include "h2/plugin_abi.h"

namespace h2::detail {

const AbiHistory& core_abi_history() {
  static_assert(H2_ABI_MINOR == 7, "add the new minor's H2_PLUGIN_API_SIZE_1_<minor> below");
  static const AbiHistory history{
      H2_ABI_MAJOR,
      {H2_PLUGIN_API_SIZE_1_0, H2_PLUGIN_API_SIZE_1_1, H2_PLUGIN_API_SIZE_1_2, H2_PLUGIN_API_SIZE_1_3,
       H2_PLUGIN_API_SIZE_1_4, H2_PLUGIN_API_SIZE_1_5, H2_PLUGIN_API_SIZE_1_6, H2_PLUGIN_API_SIZE_1_7}};
  return history;
}

AbiCheck check_abi(uint32_t plugin_major, uint32_t plugin_minor, size_t plugin_table_size, const AbiHistory& core) {
  const uint32_t core_minor = static_cast<uint32_t>(core.table_size_by_minor.size() - 1);
  auto versions = [&] {
    return "(plugin " + std::to_string(plugin_major) + "." + std::to_string(plugin_minor) + ", core " +
           std::to_string(core.major) + "." + std::to_string(core_minor) + ")";
  };
  if (plugin_major != core.major)
    return {AbiVerdict::version_mismatch,
            "ABI mismatch " + versions() + ": the major versions differ, rebuild the plugin against this H2"};
  if (plugin_minor > core_minor)
    return {AbiVerdict::version_mismatch, "ABI mismatch " + versions() + ": the plugin needs a newer H2 core"};
  const size_t required = core.table_size_by_minor[plugin_minor];
  if (plugin_table_size < required)
    return {AbiVerdict::table_too_small, "API table struct_size " + std::to_string(plugin_table_size) +
                                             " is smaller than the " + std::to_string(required) + " bytes ABI " +
                                             std::to_string(plugin_major) + "." + std::to_string(plugin_minor) +
                                             " requires"};
  return {AbiVerdict::compatible, {}};
}

}  // namespace h2::detail
