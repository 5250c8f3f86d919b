// Deliberate bugs, compiled only into the conformance suite's test plugin (H2_PLANTED_DEFECTS), so
// the suite can be shown to catch each kind of mistake a real plugin makes. The defect is chosen at
// initialize from H2_PLANTED_DEFECT. In the real cpu-reference plugin planted_defect() is a constant
// `none` and every defect branch compiles away.
#pragma once

#include <optional>
#include <string>

namespace h2::cpu_reference {

enum class Defect {
  none,
  softmax_off_by_one,      // the last column of each row is left out of the normalisation
  bf16_truncation,         // bf16 stores truncate instead of rounding to nearest even
  fp16_accumulation,       // gemm on fp16/bf16 inputs accumulates in fp16
  writes_input,            // layer_norm also writes its result into x
  ignores_strides,         // unary reads x as if it were contiguous
  ignores_stream,          // rms_norm runs at once on the calling thread, not after earlier work
  crash_on_shape,          // gemm crashes when C has 7 columns
  hang,                    // cross_entropy never returns for a vocabulary of 40
  blocked_fp32_gemm,       // not a defect: gemm sums in fp32, in blocks of 64 (a legitimate rounding)
  softmax_without_max,     // softmax exponentiates in fp32 without subtracting the row's max (overflows)
  saturating_f16,          // f16 stores saturate at +-65504 instead of rounding to +-Inf
  eps_outside_sqrt,        // rms_norm and layer_norm take 1 / (sqrt(ms) + eps), not 1 / sqrt(ms + eps)
  gemm_reads_c,            // gemm adds beta * C also when beta is 0 (BLAS does not read C then)
  ignored_rows_backward,   // cross_entropy_backward gives ignore_index rows a gradient (as if no target)
  reduce_ignores_strides,  // reduce reads x as if it were contiguous
  early_event,             // an event completes once its last task has started, not finished
  reversed_fp32_reduce,    // not a defect: sum and mean accumulate in fp32, last element first
  flushes_subnormals,      // subnormal floats read as 0, and 16-bit stores flush subnormal results to 0
  reduce_skips_nan,        // reduce sum and mean skip NaN (nansum), as if NaN were missing data
};

#ifdef H2_PLANTED_DEFECTS
Defect planted_defect();
// Parses H2_PLANTED_DEFECT; nullopt for an unknown name.
std::optional<Defect> defect_from_name(const std::string& name);
void plant_defect(Defect defect);
#else
constexpr Defect planted_defect() {
  return Defect::none;
}
#endif

}  // namespace h2::cpu_reference
