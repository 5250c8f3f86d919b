// Runs one case: generates its inputs, runs it on the plugin under test (checking stream order,
// that inputs stay unmodified and that nothing outside the outputs is written), on the reference in
// the case's dtype and in fp64, and judges every output with the tolerance policy.
#pragma once

#include "case.hpp"
#include "h2/conformance.hpp"

namespace h2::conformance {

struct Devices {
  Device plugin;
  Device reference;
};

CaseResult run_case(const Case& c, const Devices& devices);
CaseResult run_behaviour(const BehaviourCheck& check, const Devices& devices);

}  // namespace h2::conformance
