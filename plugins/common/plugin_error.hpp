// Errors inside the cpu-reference plugin: a C++ exception carrying an H2_Status, turned into a
// status code plus the calling thread's last-error message at the C ABI boundary.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "h2/plugin_abi.h"

namespace h2::plugin {

class PluginError : public std::runtime_error {
 public:
  PluginError(H2_Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  H2_Status status() const { return status_; }

 private:
  H2_Status status_;
};

[[noreturn]] inline void fail(H2_Status status, const std::string& message) {
  throw PluginError(status, message);
}

// A C enum received through the ABI, as its bits. A C caller may pass any int, and C++ may not load
// a value outside the enum's range as the enum type (UBSan: "not a valid value for type
// 'H2_MemcpyKind'"), so a plugin switches on these bits instead.
template <typename Enum>
uint32_t enum_bits(const Enum& value) {
  static_assert(std::is_enum_v<Enum> && sizeof(Enum) == sizeof(uint32_t));
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Rejects a NULL pointer argument, naming it.
template <typename T>
void require(const T* pointer, const char* name) {
  if (pointer == nullptr) fail(H2_STATUS_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

// Sets the calling thread's last-error message (read back through the table's `last_error`).
void set_last_error(const std::string& message);
const char* last_error();

// Runs `body`, mapping exceptions to a status and the thread's last-error message. Every table
// entry goes through this, so no C++ exception ever crosses the C ABI. `body` returns void (success)
// or an H2_Status of its own (queries answer H2_STATUS_NOT_READY without failing).
template <typename Body>
H2_Status guarded(const char* call, Body&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return H2_STATUS_OK;
    } else {
      return body();
    }
  } catch (const PluginError& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error(std::string("host out of memory in ") + call);
    return H2_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(std::string("internal error in ") + call + ": " + e.what());
    return H2_STATUS_INTERNAL;
  }
}

}  // namespace h2::plugin
