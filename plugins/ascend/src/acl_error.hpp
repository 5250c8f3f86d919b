// AscendCL failures as plugin errors: the ABI status a code means, and a message that names the call,
// the code and the runtime's own text (aclGetRecentErrMsg).
#pragma once

#include "acl_library.hpp"
#include "plugin_error.hpp"

namespace h2::ascend {

H2_Status status_of(aclError code);
// Throws PluginError for any code but ACL_SUCCESS.
void acl_check(const AclLibrary& acl, aclError code, const char* call);

// H2_ACL(acl, aclrtMalloc, &ptr, bytes, policy): calls the resolved function and checks its code.
#define H2_ACL(acl, function, ...) ::h2::ascend::acl_check((acl), (acl).function(__VA_ARGS__), #function)

}  // namespace h2::ascend
