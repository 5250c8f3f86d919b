// What the emulated vendor runtimes (tests only; see plugins/<vendor>/emulator/) share: a failure
// carrying the code the vendor's C call returns for it, and the codes each emulator uses for the
// failures its shared parts (memory, task queues, configuration, faults) raise.
#pragma once

#include <stdexcept>
#include <string>

namespace h2::emulator {

// A failure inside an emulator, with the vendor's return code (aclError, cnrtRet_t, ...). Each
// exported C function of an emulator catches it and returns the code.
class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// The vendor's codes for the failures the shared parts raise, and the vendor's names for the calls
// their messages mention.
struct VendorCodes {
  int invalid_argument;   // a malformed variable, a pointer that is not an allocation
  int system_failure;     // the host refused memory or a mapping
  int no_permission;      // another process's memory cannot be reached
  int internal;           // anything else a task threw
  int kernel_fault;       // an injected kernel failure
  int device_lost;        // the injected lost device
  const char* free_call;  // "aclrtFree"
};

}  // namespace h2::emulator
