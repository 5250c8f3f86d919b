/* A minimal plugin for the loader's tests, compiled once per variant with macros that break it in
 * one specific way. It is written in C against plugin_abi.h alone, as a vendor's plugin would be.
 * Its "device" is host memory and its streams run every call at once (synchronously), which is a
 * legal implementation of the stream contract. With FAKE_OP_TABLE it provides one operator, fill,
 * so the core's handling of a partial operator table can be tested. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h2/plugin_abi.h"

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR H2_ABI_MAJOR
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR H2_ABI_MINOR
#endif
#ifndef FAKE_STRUCT_SIZE
#define FAKE_STRUCT_SIZE sizeof(H2_PluginApi)
#endif
#ifndef FAKE_OP_TABLE_SIZE
#define FAKE_OP_TABLE_SIZE sizeof(H2_OpTable)
#endif
/* Its one option (ABI 1.4), "devices": how many devices it has, 1 to 9 (default 2). */
static int32_t fake_devices = 2;

static _Thread_local char last_error_text[256];

static H2_Status fail(H2_Status status, const char* message) {
  snprintf(last_error_text, sizeof last_error_text, "%s", message);
  return status;
}

/* ---- Lifecycle ---- */

#ifdef FAKE_UNDEFINED_SYMBOL
/* Stands for a vendor symbol the plugin links against that this machine's libraries lack. */
extern int h2_test_symbol_nobody_defines(void);
#endif

#ifdef FAKE_CONSTRUCTOR_ABORT
/* A library constructor that aborts: it runs inside dlopen, before H2 sees any of the plugin. */
__attribute__((constructor)) static void abort_when_loaded(void) {
  abort();
}
#endif

#if FAKE_ABI_MINOR >= 4
static const H2_OptionInfo fake_options[] = {
    {sizeof(H2_OptionInfo), "devices", "how many fake devices, 1 to 9", "2"},
#ifdef FAKE_CRASH_OPTION
    /* Crashes only when asked to, so a test sees whether the probe was given the options. */
    {sizeof(H2_OptionInfo), "crash", "1: initialize raises SIGSEGV", "0"},
#endif
};

static H2_Status option_list(const H2_OptionInfo** infos, size_t* count) {
  *infos = fake_options;
  *count = sizeof fake_options / sizeof fake_options[0];
  return H2_STATUS_OK;
}

/* Reads the options as a vendor plugin would: a key it does not know fails, naming the key and the
 * keys it knows; a value it cannot parse fails, naming both. (Unused by the variants whose initialize
 * fails first.) */
__attribute__((unused)) static H2_Status read_options(const H2_InitArgs* args) {
  char message[256];
  size_t i;
  fake_devices = 2;
  if (args->struct_size < H2_INIT_ARGS_SIZE_1_4) return H2_STATUS_OK;
  for (i = 0; i < args->option_count; ++i) {
    const H2_Option* option = H2_ARRAY_AT(H2_Option, args->options, i);
#ifdef FAKE_CRASH_OPTION
    if (strcmp(option->key, "crash") == 0) {
      if (strcmp(option->value, "1") == 0) raise(SIGSEGV);
      continue;
    }
#endif
    if (strcmp(option->key, "devices") != 0) {
      snprintf(message, sizeof message, "unknown option '%s' (the fake plugin knows: devices)", option->key);
      return fail(H2_STATUS_INVALID_ARGUMENT, message);
    }
    if (strlen(option->value) != 1 || option->value[0] < '1' || option->value[0] > '9') {
      snprintf(message, sizeof message, "option devices='%s': expected 1 to 9", option->value);
      return fail(H2_STATUS_INVALID_ARGUMENT, message);
    }
    fake_devices = option->value[0] - '0';
  }
  return H2_STATUS_OK;
}
#endif

static H2_Status initialize(const H2_InitArgs* args) {
#if defined(FAKE_INIT_CRASH)
  (void)args;
  raise(SIGSEGV);
  return H2_STATUS_OK;
#elif defined(FAKE_INIT_EXIT)
  (void)args;
  exit(3);
#elif defined(FAKE_INIT_HANG)
  (void)args;
  for (;;) pause();
  return H2_STATUS_OK;
#elif defined(FAKE_UNDEFINED_SYMBOL)
  (void)args;
  return h2_test_symbol_nobody_defines() == 0 ? H2_STATUS_OK : H2_STATUS_INTERNAL;
#elif defined(FAKE_INIT_FAILS)
  (void)args;
  return fail(H2_STATUS_DEVICE_ERROR, "simulated driver failure: device 0 did not answer");
#elif defined(FAKE_VENDOR_RUNTIME)
  /* Vendor plugins load their runtime at run time, so a machine without it can still list the plugin. */
  void* runtime = dlopen(FAKE_VENDOR_RUNTIME, RTLD_NOW | RTLD_LOCAL);
  (void)args;
  if (runtime == NULL) {
    char message[256];
    snprintf(message, sizeof message, "cannot load %s: %s", FAKE_VENDOR_RUNTIME, dlerror());
    return fail(H2_STATUS_RUNTIME_MISSING, message);
  }
  dlclose(runtime);
  return H2_STATUS_OK;
#else
#if FAKE_ABI_MINOR >= 4
  H2_Status status = read_options(args);
  if (status != H2_STATUS_OK) return status;
#endif
  args->log(args->log_user_data, H2_LOG_INFO, "fake plugin initialized");
  return H2_STATUS_OK;
#endif
}

static H2_Status shutdown(void) {
  return H2_STATUS_OK;
}
static const char* last_error(void) {
  return last_error_text;
}

/* ---- Devices ---- */

static H2_Status device_count(int32_t* count) {
  *count = fake_devices;
  return H2_STATUS_OK;
}

static uint64_t capacity(int32_t device) {
  return (uint64_t)(device + 1) << 30;
}

static H2_Status device_properties(int32_t device, H2_DeviceProperties* props) {
  if (device < 0 || device >= fake_devices) return fail(H2_STATUS_INVALID_ARGUMENT, "no such device");
  snprintf(props->name, sizeof props->name, "fake device %d", (int)device);
  snprintf(props->vendor, sizeof props->vendor, "H2 tests");
  props->kind = H2_DEVICE_KIND_NPU;
  props->total_memory_bytes = capacity(device);
  props->peak_flops[H2_DTYPE_BF16] = 1e12;
  props->supported_dtypes = 1u << H2_DTYPE_BF16;
  props->host_accessible = 1;
  return H2_STATUS_OK;
}

/* ---- Memory: host memory; streams: run each call at once ---- */

static H2_Status mem_alloc(int32_t device, size_t bytes, void** ptr) {
  if (bytes > capacity(device)) return fail(H2_STATUS_OUT_OF_MEMORY, "the fake device is smaller than that");
  *ptr = malloc(bytes);
  return *ptr ? H2_STATUS_OK : fail(H2_STATUS_OUT_OF_MEMORY, "malloc failed");
}
static H2_Status mem_free(int32_t device, void* ptr) {
  (void)device;
  free(ptr);
  return H2_STATUS_OK;
}

#ifdef FAKE_PARTIAL_ASYNC
/* Allocates in stream order but has no matching free: the loader must refuse the half pair. */
static H2_Status mem_alloc_async(int32_t device, size_t bytes, H2_Stream* stream, void** ptr) {
  (void)stream;
  return mem_alloc(device, bytes, ptr);
}
#endif

#ifdef FAKE_PARTIAL_SHARING
/* Exports but cannot import or close: the loader must refuse half of the sharing slots. */
static H2_Status mem_export(int32_t device, const void* ptr, H2_MemHandle* handle, uint64_t* offset) {
  (void)device;
  (void)ptr;
  (void)handle;
  (void)offset;
  return H2_STATUS_OK;
}
#endif

static int the_stream;
static H2_Status stream_create(int32_t device, H2_Stream** stream) {
  (void)device;
  *stream = (H2_Stream*)&the_stream;
  return H2_STATUS_OK;
}
static H2_Status stream_done(H2_Stream* stream) {
  (void)stream;
  return H2_STATUS_OK; /* everything already ran */
}
static H2_Status stream_wait_event(H2_Stream* stream, H2_Event* event) {
  (void)stream;
  (void)event;
  return H2_STATUS_OK;
}
#ifndef FAKE_NULL_MEMSET
static H2_Status memset_async(H2_Stream* stream, void* dst, uint8_t value, size_t bytes) {
  (void)stream;
  memset(dst, value, bytes);
  return H2_STATUS_OK;
}
#endif
static H2_Status memcpy_async(H2_Stream* stream, void* dst, const void* src, size_t bytes, H2_MemcpyKind kind) {
  (void)stream;
  (void)kind;
  memcpy(dst, src, bytes);
  return H2_STATUS_OK;
}

static int the_event;
static H2_Status event_create(int32_t device, uint32_t flags, H2_Event** event) {
  (void)device;
  (void)flags;
  *event = (H2_Event*)&the_event;
  return H2_STATUS_OK;
}
static H2_Status event_done(H2_Event* event) {
  (void)event;
  return H2_STATUS_OK;
}
static H2_Status event_record(H2_Event* event, H2_Stream* stream) {
  (void)event;
  (void)stream;
  return H2_STATUS_OK;
}

/* ---- Operators: fill on contiguous f32 only ---- */

#ifdef FAKE_OP_TABLE
#ifndef FAKE_NULL_CAPABILITY
static H2_Status capability(int32_t device, uint32_t op, H2_OpCapability* cap) {
  (void)device;
  if (op != H2_OP_FILL) return fail(H2_STATUS_UNSUPPORTED, "only fill");
  cap->dtypes = 1u << H2_DTYPE_F32;
  cap->strided_tensors = 0;
  cap->deterministic = 1;
  return H2_STATUS_OK;
}
#endif

static H2_Status fill(H2_Stream* stream, const H2_FillArgs* args) {
  (void)stream;
  int64_t n = 1;
  for (uint32_t d = 0; d < args->y.rank; ++d) n *= args->y.shape[d];
  for (int64_t i = 0; i < n; ++i) ((float*)args->y.data)[i] = (float)args->value;
  return H2_STATUS_OK;
}

static const H2_OpTable op_table = {
    .struct_size = FAKE_OP_TABLE_SIZE,
#ifndef FAKE_NULL_CAPABILITY
    .capability = capability,
#endif
    .fill = fill,
};
#endif

/* ---- A collective table with a slot missing, or too small: both refused at load ---- */

#ifdef FAKE_COLLECTIVES
static H2_Status get_unique_id(H2_CommUniqueId* id) {
  (void)id;
  return H2_STATUS_OK;
}

#ifdef FAKE_UNIQUE_ID_BYTES
/* Every slot set (none is ever called by the loader's tests), the id size as the variant says. */
static H2_Status comm_init_rank(int32_t device, const H2_CommUniqueId* id, int32_t nranks, int32_t rank,
                                uint32_t timeout_ms, H2_Comm** comm) {
  (void)device, (void)id, (void)nranks, (void)rank, (void)timeout_ms, (void)comm;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status comm_destroy(H2_Comm* comm) {
  (void)comm;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status comm_abort(H2_Comm* comm, const char* reason) {
  (void)comm, (void)reason;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status reduction(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype, uint32_t op,
                           H2_Stream* stream) {
  (void)comm, (void)send, (void)recv, (void)count, (void)dtype, (void)op, (void)stream;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status allgather(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype,
                           H2_Stream* stream) {
  (void)comm, (void)send, (void)recv, (void)count, (void)dtype, (void)stream;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status broadcast(H2_Comm* comm, const void* send, void* recv, uint64_t count, uint32_t dtype, int32_t root,
                           H2_Stream* stream) {
  (void)comm, (void)send, (void)recv, (void)count, (void)dtype, (void)root, (void)stream;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status send(H2_Comm* comm, const void* buffer, uint64_t count, uint32_t dtype, int32_t peer,
                      H2_Stream* stream) {
  (void)comm, (void)buffer, (void)count, (void)dtype, (void)peer, (void)stream;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status recv(H2_Comm* comm, void* buffer, uint64_t count, uint32_t dtype, int32_t peer, H2_Stream* stream) {
  (void)comm, (void)buffer, (void)count, (void)dtype, (void)peer, (void)stream;
  return H2_STATUS_UNSUPPORTED;
}
static H2_Status group_call(void) {
  return H2_STATUS_UNSUPPORTED;
}
#endif

static const H2_CollectiveTable collective_table = {
    .struct_size = FAKE_COLLECTIVE_TABLE_SIZE,
    .library_name = "fake collectives",
    .scope = H2_COMM_SCOPE_NODE,
    .get_unique_id = get_unique_id,
#ifdef FAKE_UNIQUE_ID_BYTES
    .unique_id_bytes = FAKE_UNIQUE_ID_BYTES,
    .comm_init_rank = comm_init_rank,
    .comm_destroy = comm_destroy,
    .comm_abort = comm_abort,
    .allreduce = reduction,
    .reduce_scatter = reduction,
    .allgather = allgather,
    .broadcast = broadcast,
    .send = send,
    .recv = recv,
    .group_start = group_call,
    .group_end = group_call,
#endif
};
#endif

static const H2_PluginApi api = {
    .struct_size = FAKE_STRUCT_SIZE,
    .abi_major = FAKE_ABI_MAJOR,
    .abi_minor = FAKE_ABI_MINOR,
    .plugin_name = FAKE_NAME,
    .plugin_version = "0.0-test",
    .initialize = initialize,
    .shutdown = shutdown,
    .last_error = last_error,
    .device_count = device_count,
    .device_properties = device_properties,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .stream_create = stream_create,
    .stream_destroy = stream_done,
    .stream_synchronize = stream_done,
    .stream_query = stream_done,
    .stream_wait_event = stream_wait_event,
#ifndef FAKE_NULL_MEMSET
    .memset_async = memset_async,
#endif
    .memcpy_async = memcpy_async,
    .event_create = event_create,
    .event_destroy = event_done,
    .event_record = event_record,
    .event_query = event_done,
    .event_synchronize = event_done,
#ifdef FAKE_OP_TABLE
    .op_table = &op_table,
#endif
#ifdef FAKE_PARTIAL_SHARING
    .mem_export = mem_export,
#endif
#ifdef FAKE_PARTIAL_ASYNC
    .mem_alloc_async = mem_alloc_async,
#endif
#if FAKE_ABI_MINOR >= 4
    .option_list = option_list,
#endif
#ifdef FAKE_COLLECTIVES
    .collective_table = &collective_table,
#endif
};

#ifdef FAKE_NO_ENTRY_POINT
H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api_misspelled(uint32_t abi_major) {
  (void)abi_major;
  return &api;
}
#else
H2_PLUGIN_EXPORT const H2_PluginApi* h2_plugin_get_api(uint32_t abi_major) {
  (void)abi_major;
  return &api;
}
#endif
