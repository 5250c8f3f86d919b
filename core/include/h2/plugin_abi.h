/*
 * H2 device plugin C ABI.
 *
 * This header is the whole contract between H2's core (libh2core) and a vendor plugin. A plugin is a
 * shared library that exports exactly one symbol, `h2_plugin_get_api`, and implements the calls of the
 * table it returns. The core loads plugins at run time (RTLD_LOCAL), so a plugin must build with
 * hidden visibility and link its vendor runtime privately.
 *
 * The header is pure C (C11 and C++ compatible) and uses only its own types and fixed-width integers.
 *
 * ---- Reading order ----
 *   1. Versioning and struct sizes    4. Devices             7. Events
 *   2. Status codes and errors        5. Memory              8. Operators (reserved slot)
 *   3. Lifecycle and logging          6. Streams and copies  9. The table and the entry point
 *
 * ---- Conventions that hold for every call ----
 * - Every call returns an H2_Status. H2_STATUS_OK is success. On any other status the plugin sets the
 *   calling thread's last-error message, which the core reads at once through `last_error`.
 * - A NULL slot in the table means "this plugin does not support the call". The core reports that as
 *   unsupported itself, which is distinct from a supported call that failed. Slots marked
 *   [optional] may be NULL; a plugin with any other slot NULL is rejected when it loads.
 * - Device pointers (returned by `mem_alloc`) are opaque to host code: a plugin may hand out addresses
 *   that the host cannot dereference. Only the plugin's own calls read or write through them.
 * - "Blocks" means the call may wait for device work to complete. Calls documented as non-blocking
 *   return after enqueuing work and must not wait for earlier work on the stream.
 * - Enum-typed values inside structs are stored as uint32_t, so their size never depends on the compiler.
 * - Calls are thread-safe: the core may call any slot from any thread concurrently, except
 *   `initialize` and `shutdown`, which the core calls once each, with no other call in flight.
 * - Stream ordering follows CUDA: work enqueued on a stream runs after all work enqueued earlier on
 *   that same stream. Streams are otherwise unordered unless joined with events.
 */
#ifndef H2_PLUGIN_ABI_H
#define H2_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * 1. Versioning and struct sizes
 *
 * The ABI has a major and a minor version.
 * - A new minor only appends: new fields at the end of structs, new slots at the end of the table,
 *   new enum values. Nothing is removed, reordered or retyped.
 * - Anything else (a reorder, a type change, a changed meaning) bumps the major.
 *
 * Compatibility rule (the core enforces it when it loads a plugin):
 * - The plugin's major must equal the core's major.
 * - The plugin's minor may be older than or equal to the core's minor, never newer.
 * - The core reads only the part of the plugin's table that the plugin's `struct_size` covers;
 *   every slot beyond it is treated as NULL (unsupported). The table must cover at least every
 *   slot of the minor it declares (H2_PLUGIN_API_SIZE_1_0 for minor 0, and so on).
 *
 * Every struct begins with `size_t struct_size`. For structs the core passes in (init args,
 * properties to fill), the core sets `struct_size` to the size it knows; a plugin built against an
 * older minor reads and writes only the fields it knows, which always fit, because the core's
 * minor is never older. H2_STRUCT_SIZE gives the size of a struct up to and including a field, so
 * each minor's size stays fixed forever even after later minors append.
 * ---------------------------------------------------------------------------------------------- */
#define H2_ABI_MAJOR 1
#define H2_ABI_MINOR 0

#define H2_STRUCT_SIZE(type, last_field) (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* ------------------------------------------------------------------------------------------------
 * 2. Status codes and errors
 * ---------------------------------------------------------------------------------------------- */
typedef enum H2_Status {
  H2_STATUS_OK = 0,
  H2_STATUS_INVALID_ARGUMENT = 1, /* a pointer, size, device index or handle is not valid */
  H2_STATUS_OUT_OF_MEMORY = 2,    /* device or host allocation cannot be satisfied */
  H2_STATUS_NOT_READY = 3,        /* query calls only: work is still pending; not a failure */
  H2_STATUS_UNSUPPORTED = 4,      /* the call exists but not for these arguments (e.g. a dtype) */
  H2_STATUS_RUNTIME_MISSING = 5,  /* initialize only: the vendor runtime library is not installed */
  H2_STATUS_NO_DEVICE = 6,        /* initialize only: the runtime works but finds no device */
  H2_STATUS_DEVICE_ERROR = 7,     /* the device or its driver failed; the device may be unusable */
  H2_STATUS_INTERNAL = 8          /* a bug or broken invariant inside the plugin */
} H2_Status;

/* ------------------------------------------------------------------------------------------------
 * 3. Lifecycle and logging
 * ---------------------------------------------------------------------------------------------- */
typedef enum H2_LogLevel { H2_LOG_ERROR = 0, H2_LOG_WARNING = 1, H2_LOG_INFO = 2, H2_LOG_DEBUG = 3 } H2_LogLevel;

/* The core's logger. `message` is a NUL-terminated line without a trailing newline; it is borrowed
 * for the duration of the call only. May be called from any thread at any time between the start
 * of `initialize` and the return of `shutdown`. Thread-safe; does not block on device work. */
typedef void (*H2_LogFn)(void* user_data, H2_LogLevel level, const char* message);

typedef struct H2_InitArgs {
  size_t struct_size; /* set by the core: H2_INIT_ARGS_SIZE_1_0 or larger */
  uint32_t core_abi_major;
  uint32_t core_abi_minor;
  H2_LogFn log;        /* never NULL */
  void* log_user_data; /* passed back to `log` unchanged; owned by the core */
  uint32_t log_level;  /* an H2_LogLevel: the most verbose the core prints; skip formatting beyond it */
} H2_InitArgs;
#define H2_INIT_ARGS_SIZE_1_0 H2_STRUCT_SIZE(H2_InitArgs, log_level)

/* ------------------------------------------------------------------------------------------------
 * 4. Devices
 * ---------------------------------------------------------------------------------------------- */

/* Element types. Bit `1 << dtype` is set in H2_DeviceProperties.supported_dtypes for each dtype the
 * device computes in; `peak_flops[dtype]` is indexed by the same value. 16-bit floats are stored as
 * their raw bits. */
typedef enum H2_DType {
  H2_DTYPE_INVALID = 0,
  H2_DTYPE_F32 = 1,
  H2_DTYPE_F16 = 2,
  H2_DTYPE_BF16 = 3,
  H2_DTYPE_F64 = 4,
  H2_DTYPE_I32 = 5,
  H2_DTYPE_I64 = 6,
  H2_DTYPE_U8 = 7,
  H2_DTYPE_BOOL = 8
} H2_DType;
#define H2_DTYPE_SLOTS 16 /* room in per-dtype arrays; dtype values stay below this */

typedef enum H2_DeviceKind {
  H2_DEVICE_KIND_UNKNOWN = 0,
  H2_DEVICE_KIND_CPU = 1,
  H2_DEVICE_KIND_GPU = 2,
  H2_DEVICE_KIND_NPU = 3 /* NPUs, MLUs and other accelerators */
} H2_DeviceKind;

/* Which memory a NIC may read and write directly (bitmask), so DiComm can skip host staging. */
typedef enum H2_NicDirectMemory {
  H2_NIC_DIRECT_HOST = 1u << 0,  /* pinned host memory from host_alloc can be registered with a NIC */
  H2_NIC_DIRECT_CUDA = 1u << 1,  /* device pointers can be registered as CUDA memory (FI_HMEM_CUDA) */
  H2_NIC_DIRECT_DMABUF = 1u << 2 /* device memory can be exported as a dma-buf file descriptor */
} H2_NicDirectMemory;

typedef struct H2_DeviceProperties {
  size_t struct_size;                  /* set by the core before the call */
  char name[128];                      /* NUL-terminated model name, e.g. "cpu-reference" */
  char vendor[64];                     /* NUL-terminated vendor name */
  char bus_id[32];                     /* PCI bus id "0000:17:00.0", or "" when there is none */
  uint32_t kind;                       /* an H2_DeviceKind */
  uint32_t compute_units;              /* SMs, AI cores, CPU worker threads... */
  uint64_t total_memory_bytes;         /* capacity usable through mem_alloc */
  double memory_bandwidth_bytes_per_s; /* peak device memory bandwidth; 0 = unknown */
  double peak_flops[H2_DTYPE_SLOTS];   /* peak dense FLOP/s (a multiply-add is 2) per dtype; 0 = unknown */
  uint64_t supported_dtypes;           /* bitmask of 1 << H2_DType */
  uint32_t nic_direct_memory;          /* bitmask of H2_NicDirectMemory */
  uint32_t host_accessible;            /* 1 if host code may dereference device pointers directly */
} H2_DeviceProperties;
#define H2_DEVICE_PROPERTIES_SIZE_1_0 H2_STRUCT_SIZE(H2_DeviceProperties, host_accessible)

/* ------------------------------------------------------------------------------------------------
 * 5. Memory, 6. Streams and copies, 7. Events: handle types
 * ---------------------------------------------------------------------------------------------- */
typedef struct H2_Stream H2_Stream; /* opaque; created and owned by the plugin */
typedef struct H2_Event H2_Event;   /* opaque; created and owned by the plugin */

typedef enum H2_MemcpyKind {
  H2_MEMCPY_HOST_TO_DEVICE = 1,
  H2_MEMCPY_DEVICE_TO_HOST = 2,
  H2_MEMCPY_DEVICE_TO_DEVICE = 3 /* both pointers from mem_alloc of this plugin, any of its devices */
} H2_MemcpyKind;

typedef enum H2_EventFlags {
  H2_EVENT_DEFAULT = 0,
  H2_EVENT_DISABLE_TIMING = 1u << 0 /* the event cannot be used with event_elapsed_ms */
} H2_EventFlags;

/* ------------------------------------------------------------------------------------------------
 * 8. Operators
 * The operator table is defined by a later minor of this ABI. In ABI 1.0 the slot must be NULL.
 * ---------------------------------------------------------------------------------------------- */
struct H2_OpTable;

/* ------------------------------------------------------------------------------------------------
 * 9. The table
 * ---------------------------------------------------------------------------------------------- */
typedef struct H2_PluginApi {
  /* ---- Identity: these five fields keep their offsets in every major, so a core can always
   *      read which version a plugin speaks and name it in an error. ---- */
  size_t struct_size;         /* sizeof the table as the plugin was built */
  uint32_t abi_major;         /* H2_ABI_MAJOR the plugin was built against */
  uint32_t abi_minor;         /* H2_ABI_MINOR the plugin was built against */
  const char* plugin_name;    /* static NUL-terminated string, e.g. "cpu-reference" */
  const char* plugin_version; /* static NUL-terminated string, the plugin's own release */

  /* ---- Lifecycle and errors ---- */

  /* Initializes the plugin. Called once, before any other call except `last_error`. `args` is
   * borrowed for the call only; the logger it names stays valid until `shutdown` returns.
   * Returns H2_STATUS_RUNTIME_MISSING when the vendor runtime library cannot be found,
   * H2_STATUS_NO_DEVICE when it is present but finds no usable device, any other error when
   * initialization failed; in all three cases the core calls nothing else except `last_error`.
   * Blocks while the vendor runtime starts. */
  H2_Status (*initialize)(const H2_InitArgs* args);

  /* Releases every resource the plugin still holds. Called once, after every stream, event and
   * allocation the core created has been destroyed or freed, and never after a failed initialize.
   * Blocks until the plugin's threads have stopped. No call is made afterwards. */
  H2_Status (*shutdown)(void);

  /* Returns the message of the last failed call made on the calling thread, or "" if none.
   * The string is owned by the plugin and stays valid until the next call on that thread.
   * Never NULL, never blocks; may be called before initialize. */
  const char* (*last_error)(void);

  /* ---- Devices ---- */

  /* Writes the number of devices (>= 1 after a successful initialize) to `*count`. Non-blocking. */
  H2_Status (*device_count)(int32_t* count);

  /* Fills `*props` for device `device` (0 <= device < count). The core zeroes `*props` and sets
   * `props->struct_size` first; the plugin writes only fields that fit in it. `props` is borrowed
   * for the call only. Non-blocking. */
  H2_Status (*device_properties)(int32_t device, H2_DeviceProperties* props);

  /* ---- Memory ---- */

  /* Allocates `bytes` (> 0) of memory on `device`, aligned to at least 256 bytes, and writes the
   * device pointer to `*ptr`. The contents are unspecified. The memory is owned by the caller until
   * passed to mem_free. Returns H2_STATUS_OUT_OF_MEMORY (with a message naming the device, the
   * request and what is free) when it does not fit. Non-blocking. */
  H2_Status (*mem_alloc)(int32_t device, size_t bytes, void** ptr);

  /* Frees `ptr` from mem_alloc on `device`. Blocks until all work enqueued so far that may use the
   * memory has completed (as cudaFree does), so queued work never touches freed memory. */
  H2_Status (*mem_free)(int32_t device, void* ptr);

  /* [optional] Writes the device's currently free and total allocatable bytes. Non-blocking. */
  H2_Status (*mem_info)(int32_t device, uint64_t* free_bytes, uint64_t* total_bytes);

  /* [optional] Allocates `bytes` (> 0) of pinned (page-locked) host memory that host code may read and write
   * and that copies and NICs may use at full speed. Owned by the caller until host_free. */
  H2_Status (*host_alloc)(size_t bytes, void** ptr);

  /* [optional] Frees memory from host_alloc. Blocks until work enqueued so far on every stream completed. */
  H2_Status (*host_free)(void* ptr);

  /* ---- Streams ---- */

  /* Creates an in-order work queue on `device` and writes its handle to `*stream`. The handle is
   * owned by the caller until stream_destroy. Non-blocking. */
  H2_Status (*stream_create)(int32_t device, H2_Stream** stream);

  /* Destroys `stream`. Blocks until the stream's pending work has completed. The handle is
   * invalid afterwards. */
  H2_Status (*stream_destroy)(H2_Stream* stream);

  /* Blocks until all work enqueued on `stream` so far has completed. Returns the first error that
   * asynchronous work on the stream hit, if any; such an error is sticky for the stream. */
  H2_Status (*stream_synchronize)(H2_Stream* stream);

  /* Returns H2_STATUS_OK if all work enqueued on `stream` has completed (including work still
   * executing: a running task is not complete), H2_STATUS_NOT_READY if not, or the stream's sticky
   * error. Non-blocking. */
  H2_Status (*stream_query)(H2_Stream* stream);

  /* Makes all work enqueued on `stream` after this call wait until the work captured by the most
   * recent event_record of `event` has completed. If `event` was never recorded this is a no-op.
   * Later records of `event` do not affect this wait. `event` may belong to another device of the
   * plugin. Non-blocking for the host. */
  H2_Status (*stream_wait_event)(H2_Stream* stream, H2_Event* event);

  /* ---- Copies (enqueued on a stream) ---- */

  /* Sets `bytes` bytes at device pointer `dst` to `value`. Non-blocking. */
  H2_Status (*memset_async)(H2_Stream* stream, void* dst, uint8_t value, size_t bytes);

  /* Copies `bytes` bytes from `src` to `dst`; `kind` says which side is host memory. The regions
   * must not overlap. Non-blocking: a host buffer (pageable or pinned) is borrowed until the copy has
   * completed, so the caller must neither free nor modify it (H2D) nor read it (D2H) before then
   * (stream_synchronize, or an event recorded after the copy has completed). */
  H2_Status (*memcpy_async)(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind);

  /* ---- Events ---- */

  /* Creates an event on `device` with H2_EventFlags `flags`; owned by the caller until
   * event_destroy. A new event counts as complete. Non-blocking. */
  H2_Status (*event_create)(int32_t device, uint32_t flags, H2_Event** event);

  /* Destroys `event`. Waits already enqueued on streams still complete correctly. Non-blocking. */
  H2_Status (*event_destroy)(H2_Event* event);

  /* Captures in `event` all work enqueued on `stream` so far; the event completes when that work has.
   * Re-recording replaces what the event captures. Non-blocking. */
  H2_Status (*event_record)(H2_Event* event, H2_Stream* stream);

  /* Returns H2_STATUS_OK if the captured work has completed, H2_STATUS_NOT_READY if not.
   * Non-blocking. */
  H2_Status (*event_query)(H2_Event* event);

  /* Blocks until the captured work has completed. */
  H2_Status (*event_synchronize)(H2_Event* event);

  /* [optional] Writes the time in milliseconds between the completion of `start` and of `end`. Both must have
   * been recorded, have completed (else H2_STATUS_NOT_READY) and have timing enabled. Non-blocking. */
  H2_Status (*event_elapsed_ms)(H2_Event* start, H2_Event* end, float* milliseconds);

  /* ---- Operators ---- */

  /* Reserved for the operator table of a later minor. Must be NULL in ABI 1.0. */
  const struct H2_OpTable* op_table;
} H2_PluginApi;

#define H2_PLUGIN_API_SIZE_1_0 H2_STRUCT_SIZE(H2_PluginApi, op_table)

/* The identity prefix that is the same in every major. */
#define H2_PLUGIN_API_IDENTITY_SIZE H2_STRUCT_SIZE(H2_PluginApi, plugin_version)

/* ---- The entry point ----
 * The one symbol a plugin exports. `abi_major` is the major the core speaks. A plugin that supports
 * several majors returns the table for that major; otherwise it returns its own table and the core
 * reports the mismatch, naming both versions. The table is static: it lives as long as the library
 * stays loaded. May be called before initialize and more than once. Non-blocking. */
#define H2_PLUGIN_ENTRY_POINT "h2_plugin_get_api"
typedef const H2_PluginApi* (*H2_GetApiFn)(uint32_t abi_major);

#if defined(__GNUC__)
#define H2_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define H2_PLUGIN_EXPORT
#endif

/* Size guards: each minor's sizes are frozen forever. A failing assert means a field was inserted
 * or retyped, which needs a major bump. (x86-64 and aarch64 LP64 layouts.) */
#if defined(__cplusplus)
#define H2_STATIC_ASSERT static_assert
#else
#define H2_STATIC_ASSERT _Static_assert
#endif
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
H2_STATIC_ASSERT(H2_INIT_ARGS_SIZE_1_0 == 36, "H2_InitArgs 1.0 layout changed");
H2_STATIC_ASSERT(H2_DEVICE_PROPERTIES_SIZE_1_0 == 400, "H2_DeviceProperties 1.0 layout changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_IDENTITY_SIZE == 32, "H2_PluginApi identity prefix changed");
H2_STATIC_ASSERT(H2_PLUGIN_API_SIZE_1_0 == 224, "H2_PluginApi 1.0 layout changed");
#endif

#ifdef __cplusplus
}
#endif

#endif /* H2_PLUGIN_ABI_H */
