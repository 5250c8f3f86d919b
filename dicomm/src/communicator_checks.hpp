// The argument checks and views that communicator.cpp and point_to_point.cpp share.
#pragma once

#include <string>

#include "h2/dicomm/error.hpp"
#include "h2/tensor.hpp"

namespace h2::dicomm::detail {

[[noreturn]] inline void usage(const std::string& message) {
  throw CommError(CommErrorKind::usage, -1, "DiComm: " + message);
}

inline void check_tensor(const char* call, const char* what, const Tensor& t) {
  if (!t.defined()) usage(std::string(call) + ": " + what + " is undefined");
  if (!t.is_contiguous())
    usage(std::string(call) + ": " + what + " " + t.describe() +
          " is not contiguous (DiComm needs contiguous tensors)");
}

inline Tensor flat(const Tensor& t) {
  return t.view({t.numel()});
}

}  // namespace h2::dicomm::detail
