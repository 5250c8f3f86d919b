/*
 * The subset of Cambricon's CNRT runtime API (libcnrt.so) that H2's MLU plugin uses.
 *
 * Written for H2 from Cambricon's public documentation of CNRT 6 (the CNRT Developer Guide and API
 * reference of CNToolkit 3.x, CNRT 6.0.2 to 6.14.1: device management, memory, queue, notifier, IPC
 * and error-handling chapters). It declares types, constants and signatures only: the plugin resolves
 * every function by name at run time (plugins/mlu/src/cnrt_library.cpp), so it builds without
 * Neuware; the emulator under plugins/mlu/emulator implements the same signatures, so a signature
 * written wrongly here fails both. Names, values and parameter orders are the documented ones;
 * nothing here is Cambricon's text.
 */
#ifndef H2_MLU_CNRT_H
#define H2_MLU_CNRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors (values as in cnrt.h of CNRT 6.0.2 and 6.14.1) ----
 * Every call returns a cnrtRet_t; cnrtGetErrorStr gives its text (a static string of the runtime).
 * cnrtGetLastError returns and clears the calling thread's last error. CNRT has no "device lost"
 * code: a device that stops answering fails calls with cnrtErrorDevice or cnrtErrorCndrvFuncCall. */
typedef enum cnrtRet {
  cnrtSuccess = 0,
  cnrtErrorNotReady = 1,                   /* queue or notifier: work still pending */
  cnrtErrorInit = 100002,                  /* the runtime could not initialize (driver missing) */
  cnrtErrorNoDevice = 100004,              /* no MLU device found */
  cnrtErrorDeviceInvalid = 100005,         /* a device ordinal outside [0, count) */
  cnrtErrorArgsInvalid = 100006,           /* an argument is invalid */
  cnrtErrorSys = 100007,                   /* a system call failed */
  cnrtErrorSysNoMem = 100010,              /* host out of memory */
  cnrtErrorInvalidResourceHandle = 100014, /* a queue or notifier that is not live */
  cnrtErrorIllegalState = 100015,          /* e.g. a queue of another device than the current one */
  cnrtErrorNotSupport = 100050,
  cnrtErrorOpsNotPermitted = 100051,
  cnrtErrorQueue = 100060,         /* a task on the queue failed */
  cnrtErrorNoMem = 100100,         /* device out of memory */
  cnrtErrorKernelTrap = 100132,    /* a kernel trapped on the device (CNRT 6.14) */
  cnrtErrorDevice = 632006,        /* the device failed (no longer answers) */
  cnrtErrorBusy = 632014,          /* deprecated "not ready" of older CNRT 6 releases */
  cnrtErrorCndrvFuncCall = 632015, /* the driver call underneath failed */
  cnrtErrorUnknown = 999991
} cnrtRet_t;

typedef const char* (*cnrtGetErrorStrFn)(cnrtRet_t code);
typedef cnrtRet_t (*cnrtGetLastErrorFn)(void);

/* ---- Devices ----
 * There is no init call since CNRT 5: the first call initializes. cnrtSetDevice makes `device`
 * current for the calling thread; memory, queue and notifier calls act on the current device. */
typedef cnrtRet_t (*cnrtGetDeviceCountFn)(unsigned int* count);
typedef cnrtRet_t (*cnrtSetDeviceFn)(int device);
typedef cnrtRet_t (*cnrtGetDeviceFn)(int* device);
typedef cnrtRet_t (*cnrtSyncDeviceFn)(void);

/* The device's name ("MLU370-X8", "MLU590-H8"), the first field of cnrtDeviceProp_t. In CNRT 6.0.2
 * the struct holds only the name; CNRT 6.14's header maps the call to cnrtGetDeviceProperties_V3 with
 * a larger struct, but the plain symbol remains. The plugin reads only the name and gives room for
 * more, so either fills it safely. */
typedef struct cnrtDeviceProp {
  char name[256];
  char reserved[4096 - 256];
} cnrtDeviceProp_t;
typedef cnrtRet_t (*cnrtGetDevicePropertiesFn)(cnrtDeviceProp_t* prop, int device);

/* Attributes (the same values in CNRT 6.0.2 and 6.14.1). */
typedef enum cnrtDeviceAttr {
  cnrtAttrClusterCount = 0x205,    /* clusters on the device */
  cnrtAttrMcorePerCluster = 0x206, /* MLU cores per cluster */
  cnrtAttrIpuClockRate = 0x402,    /* peak clock of the cores, kHz */
  cnrtAttrMemClockRate = 0x403,    /* peak memory clock, kHz */
  cnrtAttrGmemBusWidth = 0x404,    /* bits */
  cnrtAttrTotalMemSize = 0x405     /* device memory, MiB */
} cnrtDeviceAttr_t;
typedef cnrtRet_t (*cnrtDeviceGetAttributeFn)(int* value, cnrtDeviceAttr_t attr, int device);

/* Free and total memory of the current device, bytes. */
typedef cnrtRet_t (*cnrtMemGetInfoFn)(size_t* free_bytes, size_t* total_bytes);

/* ---- Memory ----
 * cnrtMalloc: device memory of the current device, owned by the caller until cnrtFree. cnrtFree does
 * not wait for queued work that uses the memory. cnrtHostMalloc: page-locked host memory, the only
 * host memory cnrtMemcpyAsync copies asynchronously (with pageable memory it may copy synchronously
 * or fail). */
typedef cnrtRet_t (*cnrtMallocFn)(void** ptr, size_t bytes);
typedef cnrtRet_t (*cnrtFreeFn)(void* ptr);
typedef cnrtRet_t (*cnrtHostMallocFn)(void** ptr, size_t bytes);
typedef cnrtRet_t (*cnrtFreeHostFn)(void* ptr);

typedef enum cnrtMemTransDir {
  cnrtMemcpyHostToDev = 0,
  cnrtMemcpyDevToDev = 1,
  cnrtMemcpyDevToHost = 2,
  cnrtMemcpyHostToHost = 3,
  cnrtMemcpyPeerToPeer = 4,
  cnrtMemcpyNoDirection = 5
} cnrtMemTransDir_t;

/* ---- Queues ----
 * A queue runs its tasks in order, asynchronously to the host. cnrtQueueDestroy releases the queue
 * once its work has drained. cnrtQueueQuery: cnrtSuccess when drained, cnrtErrorBusy or
 * cnrtErrorNotReady (cnrtErrorBusy in older releases) while work is pending, or the error of failed work. */
typedef struct cnrtQueue_st* cnrtQueue_t;
typedef cnrtRet_t (*cnrtQueueCreateFn)(cnrtQueue_t* queue);
typedef cnrtRet_t (*cnrtQueueDestroyFn)(cnrtQueue_t queue);
typedef cnrtRet_t (*cnrtQueueSyncFn)(cnrtQueue_t queue);
typedef cnrtRet_t (*cnrtQueueQueryFn)(cnrtQueue_t queue);

/* Copies `bytes` from `src` to `dst` in queue order (cnrtMemcpyAsync_V2, the form recent CNRT 6
 * releases recommend; the same signature as cnrtMemcpyAsync). The queue comes before the direction.
 * CNRT does not document whether a copy with pageable host memory returns before it has completed:
 * the plugin copies only page-locked memory asynchronously. */
typedef cnrtRet_t (*cnrtMemcpyAsync_V2Fn)(void* dst, void* src, size_t bytes, cnrtQueue_t queue, cnrtMemTransDir_t dir);
/* Sets `bytes` bytes at device pointer `ptr` to the byte `value` in queue order. */
typedef cnrtRet_t (*cnrtMemsetAsyncFn)(void* ptr, int value, size_t bytes, cnrtQueue_t queue);

/* Runs `fn(args)` on a runtime thread once the queue reaches it; the queue's later work waits until
 * it has returned. `fn` must not call CNRT. */
typedef void (*cnrtHostFn_t)(void* args);
typedef cnrtRet_t (*cnrtInvokeHostFuncFn)(cnrtQueue_t queue, cnrtHostFn_t fn, void* args);

/* ---- Notifiers (CNRT's events) ----
 * cnrtPlaceNotifier captures the work queued so far; a notifier never placed counts as complete.
 * cnrtQueueWaitNotifier(notifier, queue, flags = 0): the queue's later work waits for what the
 * notifier captured (the notifier comes first). cnrtQueryNotifier: cnrtSuccess when complete, else
 * cnrtErrorNotReady (cnrtErrorBusy in older releases). cnrtNotifierElapsedTime: milliseconds between two completed
 * notifiers placed with timing. */
typedef struct cnrtNotifier_st* cnrtNotifier_t;
#define CNRT_NOTIFIER_DEFAULT 0x0
#define CNRT_NOTIFIER_DISABLE_TIMING_SW 0x2 /* no timestamps: cheaper */
typedef cnrtRet_t (*cnrtNotifierCreateFn)(cnrtNotifier_t* notifier);
typedef cnrtRet_t (*cnrtNotifierCreateWithFlagsFn)(cnrtNotifier_t* notifier, unsigned int flags);
typedef cnrtRet_t (*cnrtNotifierDestroyFn)(cnrtNotifier_t notifier);
typedef cnrtRet_t (*cnrtPlaceNotifierFn)(cnrtNotifier_t notifier, cnrtQueue_t queue);
typedef cnrtRet_t (*cnrtQueueWaitNotifierFn)(cnrtNotifier_t notifier, cnrtQueue_t queue, unsigned int flags);
typedef cnrtRet_t (*cnrtQueryNotifierFn)(cnrtNotifier_t notifier);
typedef cnrtRet_t (*cnrtWaitNotifierFn)(cnrtNotifier_t notifier);
typedef cnrtRet_t (*cnrtNotifierElapsedTimeFn)(cnrtNotifier_t start, cnrtNotifier_t end, float* milliseconds);

/* ---- Memory shared between processes ----
 * cnrtAcquireMemHandle: a pointer-sized handle for the allocation that starts at `ptr` (a cnrtMalloc
 * result), to pass to another process by value. cnrtMapMemHandle there (flags 0): a device pointer of
 * its own to the same memory, released with cnrtUnMapMemHandle. The exporter must not free the
 * memory while importers map it. */
typedef void* cnrtIpcMemHandle;
typedef cnrtRet_t (*cnrtAcquireMemHandleFn)(cnrtIpcMemHandle* handle, void* ptr);
typedef cnrtRet_t (*cnrtMapMemHandleFn)(void** ptr, cnrtIpcMemHandle handle, int flags);
typedef cnrtRet_t (*cnrtUnMapMemHandleFn)(void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* H2_MLU_CNRT_H */
