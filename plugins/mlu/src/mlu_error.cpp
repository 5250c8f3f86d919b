#include "mlu_error.hpp"

#include <string>

namespace h2::mlu {

H2_Status status_of(cnrtRet_t code) {
  switch (code) {
    case cnrtSuccess: return H2_STATUS_OK;
    case cnrtErrorNoMem:
    case cnrtErrorSysNoMem: return H2_STATUS_OUT_OF_MEMORY;
    case cnrtErrorArgsInvalid:
    case cnrtErrorDeviceInvalid:
    case cnrtErrorInvalidResourceHandle: return H2_STATUS_INVALID_ARGUMENT;
    case cnrtErrorNotSupport:
    case cnrtErrorOpsNotPermitted: return H2_STATUS_UNSUPPORTED;
    case cnrtErrorNoDevice: return H2_STATUS_NO_DEVICE;
    case cnrtErrorNotReady:
    case cnrtErrorBusy: return H2_STATUS_NOT_READY;
    // Misuse of the runtime by the plugin itself (a queue of another device than the current one).
    case cnrtErrorIllegalState: return H2_STATUS_INTERNAL;
    default: return H2_STATUS_DEVICE_ERROR;  // the device, its driver or a kernel failed
  }
}

std::string cnrt_message(const CnrtLibrary& cnrt, cnrtRet_t code, const char* call) {
  const char* text = cnrt.cnrtGetErrorStr(code);
  std::string message = std::string(call) + " failed with CNRT error " + std::to_string(static_cast<int>(code));
  if (text != nullptr && *text != '\0') message += ": " + std::string(text);
  return message;
}

void cnrt_check(const CnrtLibrary& cnrt, cnrtRet_t code, const char* call) {
  if (code == cnrtSuccess) return;
  const std::string message = cnrt_message(cnrt, code, call);
  cnrt.cnrtGetLastError();  // CNRT keeps the thread's last error; it is reported here
  h2::plugin::fail(status_of(code), message);
}

void cnnl_check(const CnnlLibrary& cnnl, cnnlStatus_t status, const char* call) {
  if (status == CNNL_STATUS_SUCCESS) return;
  const char* text = cnnl.cnnlGetErrorString(status);
  std::string message = std::string(call) + " failed with CNNL status " + std::to_string(static_cast<int>(status));
  if (text != nullptr && *text != '\0') message += ": " + std::string(text);
  H2_Status mapped = H2_STATUS_DEVICE_ERROR;
  if (status == CNNL_STATUS_BAD_PARAM) mapped = H2_STATUS_INVALID_ARGUMENT;
  if (status == CNNL_STATUS_NOT_SUPPORTED || status == CNNL_STATUS_ARCH_MISMATCH) mapped = H2_STATUS_UNSUPPORTED;
  if (status == CNNL_STATUS_ALLOC_FAILED) mapped = H2_STATUS_OUT_OF_MEMORY;
  h2::plugin::fail(mapped, message);
}

}  // namespace h2::mlu
