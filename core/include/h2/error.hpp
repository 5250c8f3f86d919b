// Errors of the H2 C++ API. Every failure is an h2::Error naming what failed (the plugin, the call,
// the device) with the plugin's own message, and carrying the ABI status code.
#pragma once

#include <stdexcept>
#include <string>

#include "h2/plugin_abi.h"

namespace h2 {

class Error : public std::runtime_error {
 public:
  Error(H2_Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  H2_Status status() const { return status_; }

 private:
  H2_Status status_;
};

// "out of memory", "invalid argument", ...
const char* status_name(H2_Status status);

}  // namespace h2
