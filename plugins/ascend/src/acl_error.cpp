#include "acl_error.hpp"

#include <string>

namespace h2::ascend {

H2_Status status_of(aclError code) {
  switch (code) {
    case ACL_SUCCESS: return H2_STATUS_OK;
    case ACL_ERROR_BAD_ALLOC:
    case ACL_ERROR_RT_MEMORY_ALLOCATION: return H2_STATUS_OUT_OF_MEMORY;
    case ACL_ERROR_INVALID_PARAM:
    case ACL_ERROR_RT_PARAM_INVALID:
    case ACL_ERROR_RT_INVALID_DEVICEID:
    case ACL_ERROR_RT_INVALID_HANDLE: return H2_STATUS_INVALID_ARGUMENT;
    case ACL_ERROR_RT_FEATURE_NOT_SUPPORT: return H2_STATUS_UNSUPPORTED;
    case ACL_ERROR_RT_NO_DEVICE: return H2_STATUS_NO_DEVICE;
    // Misuse of the runtime by the plugin itself (no current device, a stream of another device).
    case ACL_ERROR_UNINITIALIZE:
    case ACL_ERROR_RT_CONTEXT_NULL:
    case ACL_ERROR_RT_STREAM_CONTEXT:
    case ACL_ERROR_RT_STREAM_SUBSCRIBE:
    case ACL_ERROR_RT_STREAM_NO_CB_REG:
    case ACL_ERROR_RT_ADDR_UNALIGNED: return H2_STATUS_INTERNAL;
    default: return H2_STATUS_DEVICE_ERROR;  // 507xxx: the device, its driver or a kernel failed
  }
}

void acl_check(const AclLibrary& acl, aclError code, const char* call) {
  if (code == ACL_SUCCESS) return;
  const char* detail = acl.aclGetRecentErrMsg();
  std::string message = std::string(call) + " failed with AscendCL error " + std::to_string(code);
  if (detail != nullptr && *detail != '\0') message += ": " + std::string(detail);
  h2::plugin::fail(status_of(code), message);
}

}  // namespace h2::ascend
