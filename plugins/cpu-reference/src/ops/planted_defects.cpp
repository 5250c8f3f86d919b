#include "planted_defects.hpp"

#ifdef H2_PLANTED_DEFECTS

#include <atomic>
#include <map>

namespace h2::cpu_reference {

namespace {
std::atomic<Defect> g_defect{Defect::none};
}

Defect planted_defect() {
  return g_defect.load(std::memory_order_relaxed);
}

void plant_defect(Defect defect) {
  g_defect.store(defect);
}

std::optional<Defect> defect_from_name(const std::string& name) {
  static const std::map<std::string, Defect> names = {
      {"none", Defect::none},
      {"softmax_off_by_one", Defect::softmax_off_by_one},
      {"bf16_truncation", Defect::bf16_truncation},
      {"fp16_accumulation", Defect::fp16_accumulation},
      {"writes_input", Defect::writes_input},
      {"ignores_strides", Defect::ignores_strides},
      {"ignores_stream", Defect::ignores_stream},
      {"crash_on_shape", Defect::crash_on_shape},
      {"hang", Defect::hang},
      {"blocked_fp32_gemm", Defect::blocked_fp32_gemm},
      {"softmax_without_max", Defect::softmax_without_max},
      {"saturating_f16", Defect::saturating_f16},
      {"eps_outside_sqrt", Defect::eps_outside_sqrt},
      {"gemm_reads_c", Defect::gemm_reads_c},
      {"ignored_rows_backward", Defect::ignored_rows_backward},
      {"reduce_ignores_strides", Defect::reduce_ignores_strides},
      {"early_event", Defect::early_event},
      {"reversed_fp32_reduce", Defect::reversed_fp32_reduce},
      {"flushes_subnormals", Defect::flushes_subnormals},
      {"reduce_skips_nan", Defect::reduce_skips_nan},
  };
  auto it = names.find(name);
  if (it == names.end()) return std::nullopt;
  return it->second;
}

}  // namespace h2::cpu_reference

#endif
