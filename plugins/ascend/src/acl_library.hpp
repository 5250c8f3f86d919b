// AscendCL's runtime (libascendcl.so), opened at run time from the CANN installation the user's
// environment names (ASCEND_HOME_PATH or ASCEND_TOOLKIT_HOME, as CANN's set_env.sh exports them)
// or from the loader's path, with every function the plugin calls resolved by name up front: a
// missing library or a CANN too old for the plugin is RUNTIME_MISSING from initialize, naming it.
#pragma once

#include "ascend/acl_runtime.h"
#include "vendor_library.hpp"

namespace h2::ascend {

struct AclLibrary {
  AclLibrary();  // throws PluginError(RUNTIME_MISSING)

  h2::plugin::VendorLibrary library;
#define H2_ACL_FUNCTIONS(X)                                                                                       \
  X(aclGetRecentErrMsg)                                                                                           \
  X(aclInit)                                                                                                      \
  X(aclFinalize)                                                                                                  \
  X(aclrtGetDeviceCount)                                                                                          \
  X(aclrtSetDevice)                                                                                               \
  X(aclrtResetDevice)                                                                                             \
  X(aclrtGetSocName)                                                                                              \
  X(aclrtCtxSetSysParamOpt)                                                                                       \
  X(aclrtMalloc) X(aclrtFree) X(aclrtGetMemInfo) X(aclrtMallocHost) X(aclrtFreeHost) X(aclrtCreateStream)         \
      X(aclrtDestroyStream) X(aclrtSynchronizeStream) X(aclrtStreamQuery) X(aclrtMemcpyAsync) X(aclrtMemsetAsync) \
          X(aclrtCreateEventWithFlag) X(aclrtDestroyEvent) X(aclrtRecordEvent) X(aclrtQueryEventStatus)           \
              X(aclrtSynchronizeEvent) X(aclrtStreamWaitEvent) X(aclrtEventElapsedTime) X(aclrtSubscribeReport)   \
                  X(aclrtUnSubscribeReport) X(aclrtLaunchCallback) X(aclrtProcessReport)
#define H2_ACL_MEMBER(name) name##Fn name;
  H2_ACL_FUNCTIONS(H2_ACL_MEMBER)
#undef H2_ACL_MEMBER
  // Newer than CANN 8.0.0, NULL when the runtime lacks them (then memory export is unsupported).
  aclrtIpcMemGetExportKeyFn aclrtIpcMemGetExportKey;
  aclrtIpcMemImportByKeyFn aclrtIpcMemImportByKey;
  aclrtIpcMemCloseFn aclrtIpcMemClose;
  bool has_ipc() const {
    return aclrtIpcMemGetExportKey && aclrtIpcMemImportByKey && aclrtIpcMemClose;
  }
};

}  // namespace h2::ascend
