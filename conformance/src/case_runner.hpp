// Runs one case: generates its inputs, runs it on the plugin under test (checking stream order,
// that inputs stay unmodified and that nothing outside the outputs is written), on the reference in
// the case's dtype and in fp64, and judges every output with the tolerance policy.
#pragma once

#include <memory>

#include "case.hpp"
#include "h2/conformance.hpp"

namespace h2::conformance {

struct Devices {
  Device plugin;
  Device reference;
  // A buffer on the plugin's device that a slow memset fills ahead of each case's input copies (see
  // execute). One for the whole run: fresh memory of this size per case cost most of a quick run.
  std::shared_ptr<DeviceBuffer> delay;
};

// The size of Devices::delay.
constexpr size_t kDelayBytes = size_t{32} << 20;

CaseResult run_case(const Case& c, const Devices& devices);
CaseResult run_behaviour(const BehaviourCheck& check, const Devices& devices);

}  // namespace h2::conformance
