// Element types of the C++ API; the values are the ABI's H2_DType.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "h2/plugin_abi.h"

namespace h2 {

enum class DType : uint32_t {
  f32 = H2_DTYPE_F32,
  f16 = H2_DTYPE_F16,
  bf16 = H2_DTYPE_BF16,
  f64 = H2_DTYPE_F64,
  i32 = H2_DTYPE_I32,
  i64 = H2_DTYPE_I64,
  u8 = H2_DTYPE_U8,
  boolean = H2_DTYPE_BOOL,
};

inline constexpr DType kAllDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                       DType::i32, DType::i64, DType::u8,   DType::boolean};

std::string_view dtype_name(DType dtype);  // "f32", "bf16", ...
std::optional<DType> dtype_from_name(std::string_view name);
size_t dtype_size(DType dtype);  // bytes per element

}  // namespace h2
