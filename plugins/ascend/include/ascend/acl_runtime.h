/*
 * The subset of AscendCL's runtime API (libascendcl.so) that H2's Ascend plugin uses.
 *
 * Written for H2 from Huawei's public documentation of CANN 8.0.0 (the "AscendCL API Reference" of
 * the CANN commercial edition 8.0.0: aclInit, Device, Stream, Event, Memory, Callback and error-code
 * chapters, acl_base.h / acl_rt.h / rt_error_codes.h as documented there). It declares types,
 * constants and signatures only: the plugin resolves every function by name at run time
 * (plugins/ascend/src/acl_library.cpp), so it builds without CANN; the emulator under
 * plugins/ascend/emulator implements the same signatures, so a signature written wrongly here fails
 * both. Names, values and parameter orders are the documented ones; nothing here is Huawei's text.
 */
#ifndef H2_ASCEND_ACL_RUNTIME_H
#define H2_ASCEND_ACL_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Errors (acl_base.h, rt_error_codes.h) ---- */
typedef int aclError;
#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_UNINITIALIZE 100001
#define ACL_ERROR_REPEAT_INITIALIZE 100002
#define ACL_ERROR_BAD_ALLOC 200000
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002   /* no aclrtSetDevice on the calling thread */
#define ACL_ERROR_RT_STREAM_CONTEXT 107003 /* the stream belongs to another device */
#define ACL_ERROR_RT_ADDR_UNALIGNED 107008
#define ACL_ERROR_RT_STREAM_SUBSCRIBE 107011 /* the stream already has a callback thread */
#define ACL_ERROR_RT_STREAM_NO_CB_REG 107015 /* a callback on a stream no thread is subscribed to */
#define ACL_ERROR_RT_INVALID_HANDLE 107017
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_RT_MEMORY_ALLOCATION 207001 /* out of device memory */
#define ACL_ERROR_RT_NO_DEVICE 207004
#define ACL_ERROR_RT_NO_PERMISSION 207006
#define ACL_ERROR_RT_INTERNAL_ERROR 507000
#define ACL_ERROR_RT_STREAM_NOT_COMPLETE 507004
#define ACL_ERROR_RT_EVENT_NOT_COMPLETE 507006
#define ACL_ERROR_RT_LOST_HEARTBEAT 507010   /* the device stopped answering */
#define ACL_ERROR_RT_AICORE_EXCEPTION 507015 /* a kernel failed on an AI core */
#define ACL_ERROR_RT_DRV_INTERNAL_ERROR 507899

/* The text of the most recent error of the calling thread, or NULL. Owned by the runtime. */
typedef const char* (*aclGetRecentErrMsgFn)(void);

/* ---- Initialization ---- */
/* aclInit(const char* configPath): once per process; NULL means no configuration file. */
typedef aclError (*aclInitFn)(const char* config_path);
typedef aclError (*aclFinalizeFn)(void);

/* ---- Devices ---- */
typedef aclError (*aclrtGetDeviceCountFn)(uint32_t* count);
/* Makes `device` current for the calling thread (creating its default context on first use).
 * Memory, stream and event calls act on the calling thread's current device. */
typedef aclError (*aclrtSetDeviceFn)(int32_t device);
typedef aclError (*aclrtResetDeviceFn)(int32_t device);
/* Context-wide options of the current device. ACL_OPT_DETERMINISTIC 1 makes the operators that sum
 * in a scheduling-dependent order (FlashAttentionScoreGrad, IndexAdd, ...) sum in a fixed one. */
typedef enum aclSysParamOpt { ACL_OPT_DETERMINISTIC = 0 } aclSysParamOpt;
typedef aclError (*aclrtCtxSetSysParamOptFn)(aclSysParamOpt opt, int64_t value);
/* The SoC of the current device, e.g. "Ascend910B3"; owned by the runtime, NULL on failure. */
typedef const char* (*aclrtGetSocNameFn)(void);

/* ---- Memory ---- */
typedef enum aclrtMemMallocPolicy {
  ACL_MEM_MALLOC_HUGE_FIRST = 0,
  ACL_MEM_MALLOC_HUGE_ONLY = 1,
  ACL_MEM_MALLOC_NORMAL_ONLY = 2
} aclrtMemMallocPolicy;

typedef enum aclrtMemAttr {
  ACL_DDR_MEM = 0,
  ACL_HBM_MEM = 1,
  ACL_DDR_MEM_HUGE = 2,
  ACL_DDR_MEM_NORMAL = 3,
  ACL_HBM_MEM_HUGE = 4,
  ACL_HBM_MEM_NORMAL = 5
} aclrtMemAttr;

typedef enum aclrtMemcpyKind {
  ACL_MEMCPY_HOST_TO_HOST = 0,
  ACL_MEMCPY_HOST_TO_DEVICE = 1,
  ACL_MEMCPY_DEVICE_TO_HOST = 2,
  ACL_MEMCPY_DEVICE_TO_DEVICE = 3
} aclrtMemcpyKind;

/* Device memory of the current device; the documentation rounds sizes up to 32 bytes and adds 32. */
typedef aclError (*aclrtMallocFn)(void** dev_ptr, size_t size, aclrtMemMallocPolicy policy);
/* Waits for nothing: freeing memory that queued work still uses is the caller's bug. */
typedef aclError (*aclrtFreeFn)(void* dev_ptr);
typedef aclError (*aclrtGetMemInfoFn)(aclrtMemAttr attr, size_t* free_bytes, size_t* total_bytes);
/* Page-locked host memory. Asynchronous copies between host and device need host memory from here:
 * with other host memory "an unpredictable error may occur when the task is executed" (8.0.0). */
typedef aclError (*aclrtMallocHostFn)(void** host_ptr, size_t size);
typedef aclError (*aclrtFreeHostFn)(void* host_ptr);

/* ---- Streams ---- */
typedef void* aclrtStream;
typedef enum aclrtStreamStatus { ACL_STREAM_STATUS_COMPLETE = 0, ACL_STREAM_STATUS_NOT_READY = 1 } aclrtStreamStatus;

typedef aclError (*aclrtCreateStreamFn)(aclrtStream* stream);
/* The documentation asks for aclrtSynchronizeStream first: the stream must have no pending task. */
typedef aclError (*aclrtDestroyStreamFn)(aclrtStream stream);
typedef aclError (*aclrtSynchronizeStreamFn)(aclrtStream stream);
typedef aclError (*aclrtStreamQueryFn)(aclrtStream stream, aclrtStreamStatus* status);
/* Asynchronous copy and set, ordered on `stream`. H2H is not supported (FEATURE_NOT_SUPPORT). For
 * aclrtMemcpyAsync the documentation (8.0.0, all models) asks both addresses to be 64-byte aligned. */
typedef aclError (*aclrtMemcpyAsyncFn)(void* dst, size_t dest_max, const void* src, size_t count, aclrtMemcpyKind kind,
                                       aclrtStream stream);
typedef aclError (*aclrtMemsetAsyncFn)(void* dev_ptr, size_t max_count, int32_t value, size_t count,
                                       aclrtStream stream);

/* ---- Events ---- */
typedef void* aclrtEvent;
#define ACL_EVENT_SYNC 0x00000001u
#define ACL_EVENT_TIME_LINE 0x00000008u /* the event records a timestamp (aclrtEventElapsedTime) */
typedef enum aclrtEventRecordedStatus {
  ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
  ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

typedef aclError (*aclrtCreateEventWithFlagFn)(aclrtEvent* event, uint32_t flag);
typedef aclError (*aclrtDestroyEventFn)(aclrtEvent event);
typedef aclError (*aclrtRecordEventFn)(aclrtEvent event, aclrtStream stream);
typedef aclError (*aclrtQueryEventStatusFn)(aclrtEvent event, aclrtEventRecordedStatus* status);
typedef aclError (*aclrtSynchronizeEventFn)(aclrtEvent event);
typedef aclError (*aclrtStreamWaitEventFn)(aclrtStream stream, aclrtEvent event);
typedef aclError (*aclrtEventElapsedTimeFn)(float* milliseconds, aclrtEvent start, aclrtEvent end);

/* ---- Device memory shared between processes (IPC) ----
 * From the CANN runtime documentation after 8.0.0 (aclrtIpcMem*; Atlas A2/A3): a runtime without them
 * still loads the plugin, which then says memory export is unsupported. The exporter turns an
 * allocation into a key (65 bytes with the NUL); a process of the same node imports the key as a device
 * pointer of its own; each side closes the key (importers first) before the exporter frees. */
#define ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT 0x0UL                /* importers' pids must be listed */
#define ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION 0x1UL /* any process may import */
#define ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT 0x0UL
#define ACL_RT_IPC_MEM_KEY_LENGTH 65
typedef aclError (*aclrtIpcMemGetExportKeyFn)(void* dev_ptr, size_t size, char* key, size_t len, uint64_t flags);
typedef aclError (*aclrtIpcMemImportByKeyFn)(void** dev_ptr, const char* key, uint64_t flags);
typedef aclError (*aclrtIpcMemCloseFn)(const char* key);

/* ---- Host callbacks on a stream ----
 * A thread loops on aclrtProcessReport(timeout); aclrtSubscribeReport binds it to a stream (one
 * thread per stream, streams of one device per thread); aclrtLaunchCallback enqueues `fn(user_data)`
 * to run on that thread when the stream reaches it. With ACL_CALLBACK_BLOCK the stream's later work
 * waits until the callback has returned. A callback must not call AscendCL. */
typedef void (*aclrtCallback)(void* user_data);
typedef enum aclrtCallbackBlockType { ACL_CALLBACK_NO_BLOCK = 0, ACL_CALLBACK_BLOCK = 1 } aclrtCallbackBlockType;

typedef aclError (*aclrtSubscribeReportFn)(uint64_t thread_id, aclrtStream stream);
typedef aclError (*aclrtUnSubscribeReportFn)(uint64_t thread_id, aclrtStream stream);
typedef aclError (*aclrtLaunchCallbackFn)(aclrtCallback fn, void* user_data, aclrtCallbackBlockType block,
                                          aclrtStream stream);
/* Runs the callbacks that are due for the calling thread, waiting up to `timeout_ms` (-1: forever)
 * for one; ACL_ERROR_RT_REPORT_TIMEOUT when none came. */
typedef aclError (*aclrtProcessReportFn)(int32_t timeout_ms);
#define ACL_ERROR_RT_REPORT_TIMEOUT 507012

#ifdef __cplusplus
}
#endif

#endif /* H2_ASCEND_ACL_RUNTIME_H */
