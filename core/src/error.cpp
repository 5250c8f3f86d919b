#include "h2/error.hpp"

namespace h2 {

const char* status_name(H2_Status status) {
  switch (status) {
    case H2_STATUS_OK: return "ok";
    case H2_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case H2_STATUS_OUT_OF_MEMORY: return "out of memory";
    case H2_STATUS_NOT_READY: return "not ready";
    case H2_STATUS_UNSUPPORTED: return "unsupported";
    case H2_STATUS_RUNTIME_MISSING: return "vendor runtime missing";
    case H2_STATUS_NO_DEVICE: return "no device";
    case H2_STATUS_DEVICE_ERROR: return "device error";
    case H2_STATUS_INTERNAL: return "internal error";
  }
  return "unknown status";
}

}  // namespace h2
