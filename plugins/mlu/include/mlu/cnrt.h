/*
 * The subset of Cambricon's CNRT runtime API (libcnrt.so) that H2's MLU plugin uses.
 *
 * Written for H2 from Cambricon's public documentation of CNRT 6 (the "Cambricon CNRT Developer
 * Guide" and API reference of CNToolkit 3.x: device management, memory, queue, notifier, IPC and
 * error-handling chapters). It declares types, constants and signatures only: the plugin resolves
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

/* ---- Errors ----
 * Every call returns a cnrtRet_t; cnrtGetErrorStr gives its text (a static string of the runtime).
 * cnrtGetLastError returns and clears the calling thread's last error. */
typedef enum cnrtRet {
  cnrtSuccess = 0,
  cnrtErrorNotReady = 1,             /* queue or notifier: work still pending (CNRT >= 6.14) */
  cnrtErrorInit = 100050,            /* the runtime could not initialize (driver missing) */
  cnrtErrorNoDevice = 100051,        /* no MLU device found */
  cnrtErrorDeviceInvalid = 100052,   /* a device ordinal out of range */
  cnrtErrorArgsInvalid = 100053,     /* an argument is invalid */
  cnrtErrorSys = 100054,             /* a system call failed */
  cnrtErrorSysNoMem = 100055,        /* host out of memory */
  cnrtErrorInvalidResourceHandle = 100060, /* a queue, notifier or IPC handle that is not live */
  cnrtErrorIllegalState = 100062,    /* e.g. a queue of another device than the current one */
  cnrtErrorNotSupport = 100070,
  cnrtErrorNoMem = 100200,           /* device out of memory */
  cnrtErrorBusy = 632014,            /* queue or notifier: work still pending (CNRT < 6.14) */
  cnrtErrorQueue = 632015,           /* a task on the queue failed */
  cnrtErrorDeviceLost = 632046,      /* the device stopped answering */
  cnrtErrorKernelFault = 632047,     /* a kernel failed on the device (core exception) */
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

/* The device's name ("MLU370-X8", "MLU590-H8"): the first field of cnrtDeviceProp_t. The plugin
 * reads only the name from it and sizes the struct generously, so later CNRT fields fit. */
typedef struct cnrtDeviceProp {
  char name[256];
  char reserved[4096 - 256];
} cnrtDeviceProp_t;
typedef cnrtRet_t (*cnrtGetDevicePropertiesFn)(cnrtDeviceProp_t* prop, int device);

typedef enum cnrtDeviceAttr {
  cnrtAttrClusterCount = 0x201,       /* clusters on the device */
  cnrtAttrMcorePerCluster = 0x202,    /* MLU cores per cluster */
  cnrtAttrClockRate = 0x301,          /* peak clock of the cores, kHz */
  cnrtAttrMemoryClockRate = 0x302,    /* peak memory clock, kHz */
  cnrtAttrGlobalMemoryBusWidth = 0x303, /* bits */
  cnrtAttrTotalMemSize = 0x304        /* device memory, MiB */
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
 * cnrtErrorNotReady (by version) while work is pending, or the error of failed work. */
typedef struct cnrtQueue_st* cnrtQueue_t;
typedef cnrtRet_t (*cnrtQueueCreateFn)(cnrtQueue_t* queue);
typedef cnrtRet_t (*cnrtQueueDestroyFn)(cnrtQueue_t queue);
typedef cnrtRet_t (*cnrtQueueSyncFn)(cnrtQueue_t queue);
typedef cnrtRet_t (*cnrtQueueQueryFn)(cnrtQueue_t queue);

/* Copies `bytes` from `src` to `dst` in queue order. Note: the queue comes before the direction. */
typedef cnrtRet_t (*cnrtMemcpyAsyncFn)(void* dst, void* src, size_t bytes, cnrtQueue_t queue, cnrtMemTransDir_t dir);
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
 * cnrtErrorBusy / cnrtErrorNotReady. cnrtNotifierElapsedTime: milliseconds between two completed
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
 * cnrtAcquireMemHandle: a handle for the allocation that starts at `ptr` (a cnrtMalloc result).
 * cnrtMapMemHandle in another process: a device pointer of its own to the same memory, released with
 * cnrtUnMapMemHandle. The exporter must not free the memory while importers map it. */
typedef struct cnrtIpcMemHandle {
  char reserved[64];
} cnrtIpcMemHandle;
typedef cnrtRet_t (*cnrtAcquireMemHandleFn)(cnrtIpcMemHandle* handle, void* ptr);
typedef cnrtRet_t (*cnrtMapMemHandleFn)(void** ptr, cnrtIpcMemHandle handle, int flags);
typedef cnrtRet_t (*cnrtUnMapMemHandleFn)(void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* H2_MLU_CNRT_H */
