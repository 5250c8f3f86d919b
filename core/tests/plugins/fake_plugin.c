/* A minimal plugin for the loader's tests, compiled once per variant with macros that break it in
 * one specific way. It is written in C against plugin_abi.h alone, as a vendor's plugin would be.
 * Every runtime call beyond device discovery answers H2_STATUS_UNSUPPORTED: the loader tests need a
 * plugin that loads (or fails to), not one that computes. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

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
#ifndef FAKE_DEVICES
#define FAKE_DEVICES 2
#endif

static _Thread_local char last_error_text[256];

static H2_Status fail(H2_Status status, const char* message) {
  snprintf(last_error_text, sizeof last_error_text, "%s", message);
  return status;
}

#ifdef FAKE_UNDEFINED_SYMBOL
/* Stands for a vendor symbol the plugin links against that this machine's libraries lack. */
extern int h2_test_symbol_nobody_defines(void);
#endif

static H2_Status initialize(const H2_InitArgs* args) {
#if defined(FAKE_UNDEFINED_SYMBOL)
  (void)args;
  return h2_test_symbol_nobody_defines() == 0 ? H2_STATUS_OK : H2_STATUS_INTERNAL;
#elif defined(FAKE_INIT_FAILS)
  (void)args;
  return fail(H2_STATUS_DEVICE_ERROR, "simulated driver failure: device 0 did not answer");
#elif defined(FAKE_VENDOR_RUNTIME)
  /* Vendor plugins load their runtime at run time, so a machine without it can still list the plugin. */
  void* runtime = dlopen(FAKE_VENDOR_RUNTIME, RTLD_NOW | RTLD_LOCAL);
  if (runtime == NULL) {
    char message[256];
    snprintf(message, sizeof message, "cannot load %s: %s", FAKE_VENDOR_RUNTIME, dlerror());
    return fail(H2_STATUS_RUNTIME_MISSING, message);
  }
  dlclose(runtime);
  (void)args;
  return H2_STATUS_OK;
#else
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

static H2_Status device_count(int32_t* count) {
  *count = FAKE_DEVICES;
  return H2_STATUS_OK;
}

static H2_Status device_properties(int32_t device, H2_DeviceProperties* props) {
  if (device < 0 || device >= FAKE_DEVICES) return fail(H2_STATUS_INVALID_ARGUMENT, "no such device");
  snprintf(props->name, sizeof props->name, "fake device %d", (int)device);
  snprintf(props->vendor, sizeof props->vendor, "H2 tests");
  props->kind = H2_DEVICE_KIND_NPU;
  props->total_memory_bytes = (uint64_t)(device + 1) << 30;
  props->peak_flops[H2_DTYPE_BF16] = 1e12;
  props->supported_dtypes = 1u << H2_DTYPE_BF16;
  return H2_STATUS_OK;
}

#define UNSUPPORTED return fail(H2_STATUS_UNSUPPORTED, "the fake plugin has no memory or streams")
static H2_Status mem_alloc(int32_t d, size_t b, void** p) {
  (void)d;
  (void)b;
  (void)p;
  UNSUPPORTED;
}
static H2_Status mem_free(int32_t d, void* p) {
  (void)d;
  (void)p;
  UNSUPPORTED;
}
static H2_Status stream_create(int32_t d, H2_Stream** s) {
  (void)d;
  (void)s;
  UNSUPPORTED;
}
static H2_Status stream_one(H2_Stream* s) {
  (void)s;
  UNSUPPORTED;
}
static H2_Status stream_wait_event(H2_Stream* s, H2_Event* e) {
  (void)s;
  (void)e;
  UNSUPPORTED;
}
#ifndef FAKE_NULL_MEMSET
static H2_Status memset_async(H2_Stream* s, void* d, uint8_t v, size_t b) {
  (void)s;
  (void)d;
  (void)v;
  (void)b;
  UNSUPPORTED;
}
#endif
static H2_Status memcpy_async(H2_Stream* s, void* d, const void* f, size_t b, H2_MemcpyKind k) {
  (void)s;
  (void)d;
  (void)f;
  (void)b;
  (void)k;
  UNSUPPORTED;
}
static H2_Status event_create(int32_t d, uint32_t f, H2_Event** e) {
  (void)d;
  (void)f;
  (void)e;
  UNSUPPORTED;
}
static H2_Status event_one(H2_Event* e) {
  (void)e;
  UNSUPPORTED;
}
static H2_Status event_record(H2_Event* e, H2_Stream* s) {
  (void)e;
  (void)s;
  UNSUPPORTED;
}

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
    .stream_destroy = stream_one,
    .stream_synchronize = stream_one,
    .stream_query = stream_one,
    .stream_wait_event = stream_wait_event,
#ifndef FAKE_NULL_MEMSET
    .memset_async = memset_async,
#endif
    .memcpy_async = memcpy_async,
    .event_create = event_create,
    .event_destroy = event_one,
    .event_record = event_record,
    .event_query = event_one,
    .event_synchronize = event_one,
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
