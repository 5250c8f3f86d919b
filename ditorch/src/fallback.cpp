// Every aten operator DiTorch has no H2 kernel for runs on the CPU: its H2 inputs are copied to the
// CPU, the CPU kernel runs, and the results are copied back (at::native::cpu_fallback). Each such
// operator is logged once and counted; H2_TORCH_FALLBACK=error makes it an error naming the operator,
// as DIPU's fallback list does, so a program can check that it runs on the device alone.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>

#include "bridge.hpp"
#include "h2torch/h2torch.hpp"

namespace h2torch {
namespace {

std::mutex counts_mutex;
std::map<std::string, int64_t>& counts() {
  static std::map<std::string, int64_t> map;
  return map;
}

}  // namespace

void note_fallback(const std::string& label) {
  const char* mode = std::getenv("H2_TORCH_FALLBACK");
  TORCH_CHECK(mode == nullptr || std::strcmp(mode, "error") != 0, label,
              " has no H2 kernel, and H2_TORCH_FALLBACK=error forbids running it on the CPU");
  std::lock_guard lock(counts_mutex);
  if (counts()[label]++ == 0 && (mode == nullptr || std::strcmp(mode, "quiet") != 0))
    std::cerr << "h2torch: " << label << " has no H2 kernel; it runs on the CPU (counted: h2torch.fallback_counts())\n";
}

namespace {

void h2_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::OperatorName& name = op.schema().operator_name();
  note_fallback(name.name + (name.overload_name.empty() ? "" : "." + name.overload_name));
  at::native::cpu_fallback(op, stack);
}

}  // namespace

std::map<std::string, int64_t> fallback_counts() {
  std::lock_guard lock(counts_mutex);
  return counts();
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&h2_fallback>());
}

}  // namespace h2torch
