// The ABI compatibility rule of plugin_abi.h as a pure function, so it can be tested against any
// version history, not just the one this core was built with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace h2::detail {

struct AbiHistory {
  uint32_t major;
  // table_size_by_minor[m] is H2_PLUGIN_API_SIZE_<major>_<m>: the table size every plugin of that
  // minor must at least declare. The last entry is the core's own minor.
  std::vector<size_t> table_size_by_minor;
};

// This core's history.
const AbiHistory& core_abi_history();

enum class AbiVerdict { compatible, version_mismatch, table_too_small };

struct AbiCheck {
  AbiVerdict verdict;
  std::string message;  // empty when compatible
};

AbiCheck check_abi(uint32_t plugin_major, uint32_t plugin_minor, size_t plugin_table_size, const AbiHistory& core);

}  // namespace h2::detail
