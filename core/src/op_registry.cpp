#include "h2/op_registry.hpp"

#include <array>

namespace h2 {

namespace {

struct OpEntry {
  H2_Op op;
  std::string_view name;
  int minor;
};

#define H2_CORE_OP_ENTRY(name, NAME, id, Args, minor) OpEntry{H2_OP_##NAME, #name, minor},
constexpr std::array kOps{H2_OPS(H2_CORE_OP_ENTRY)};
#undef H2_CORE_OP_ENTRY
static_assert(kOps.size() == H2_OP_COUNT);

#define H2_CORE_OP_ID(name, NAME, id, Args, minor) H2_OP_##NAME,
constexpr std::array kIds{H2_OPS(H2_CORE_OP_ID)};
#undef H2_CORE_OP_ID

const OpEntry* find(H2_Op op) {
  const auto index = static_cast<size_t>(op);
  return index >= 1 && index <= kOps.size() ? &kOps[index - 1] : nullptr;
}

}  // namespace

std::span<const H2_Op> all_ops() {
  return kIds;
}

std::string_view op_name(H2_Op op) {
  const OpEntry* entry = find(op);
  return entry != nullptr ? entry->name : std::string_view();
}

std::optional<H2_Op> op_by_name(std::string_view name) {
  for (const OpEntry& entry : kOps)
    if (entry.name == name) return entry.op;
  return std::nullopt;
}

int op_minor(H2_Op op) {
  const OpEntry* entry = find(op);
  return entry != nullptr ? entry->minor : 0;
}

}  // namespace h2
