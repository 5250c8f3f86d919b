// Cambricon's runtime (libcnrt.so) and operator library (libcnnl.so), opened at run time from the
// Neuware installation the user's environment names (NEUWARE_HOME, default /usr/local/neuware) or from
// the loader's path, with every function the plugin calls resolved by name up front: a missing
// library or a Neuware too old for the plugin is RUNTIME_MISSING from initialize, naming it.
#pragma once

#include "mlu/cnnl.h"
#include "mlu/cnrt.h"
#include "vendor_library.hpp"

namespace h2::mlu {

// Where Neuware's library `file` is looked for: NEUWARE_HOME/lib64 and /lib, else /usr/local/neuware.
h2::plugin::VendorSearch neuware_search(const char* file);

struct CnrtLibrary {
  CnrtLibrary();  // throws PluginError(RUNTIME_MISSING)

  h2::plugin::VendorLibrary library;
#define H2_CNRT_FUNCTIONS(X)     \
  X(cnrtGetErrorStr)             \
  X(cnrtGetLastError)            \
  X(cnrtGetDeviceCount)          \
  X(cnrtSetDevice)               \
  X(cnrtGetDeviceProperties)     \
  X(cnrtDeviceGetAttribute)      \
  X(cnrtMemGetInfo)              \
  X(cnrtMalloc)                  \
  X(cnrtFree)                    \
  X(cnrtHostMalloc)              \
  X(cnrtFreeHost)                \
  X(cnrtQueueCreate)             \
  X(cnrtQueueDestroy)            \
  X(cnrtQueueSync)               \
  X(cnrtQueueQuery)              \
  X(cnrtMemcpyAsync_V2)          \
  X(cnrtMemsetAsync)             \
  X(cnrtInvokeHostFunc)          \
  X(cnrtNotifierCreateWithFlags) \
  X(cnrtNotifierDestroy)         \
  X(cnrtPlaceNotifier)           \
  X(cnrtQueueWaitNotifier)       \
  X(cnrtQueryNotifier)           \
  X(cnrtWaitNotifier)            \
  X(cnrtNotifierElapsedTime)     \
  X(cnrtAcquireMemHandle)        \
  X(cnrtMapMemHandle)            \
  X(cnrtUnMapMemHandle)
#define H2_CNRT_MEMBER(name) name##Fn name;
  H2_CNRT_FUNCTIONS(H2_CNRT_MEMBER)
#undef H2_CNRT_MEMBER
};

// Whether `code` is CNRT's "work still pending" (cnrtErrorNotReady, or cnrtErrorBusy of older
// releases), which queue and notifier queries return.
inline bool not_ready(cnrtRet_t code) {
  return code == cnrtErrorNotReady || code == cnrtErrorBusy;
}

}  // namespace h2::mlu
