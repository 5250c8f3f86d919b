// CNRT and CNNL failures as plugin errors: the ABI status a code means, and a message that names the
// call, the code and the library's own text (cnrtGetErrorStr, cnnlGetErrorString).
#pragma once

#include "cnnl_library.hpp"
#include "plugin_error.hpp"

namespace h2::mlu {

H2_Status status_of(cnrtRet_t code);
// Throw PluginError for any code but success.
void cnrt_check(const CnrtLibrary& cnrt, cnrtRet_t code, const char* call);
void cnnl_check(const CnnlLibrary& cnnl, cnnlStatus_t status, const char* call);
// A message for a failed CNRT code: "<call> failed with CNRT error <code>: <text>".
std::string cnrt_message(const CnrtLibrary& cnrt, cnrtRet_t code, const char* call);

// H2_CNRT(cnrt, cnrtMalloc, &ptr, bytes): calls the resolved function and checks its code.
#define H2_CNRT(cnrt, function, ...) ::h2::mlu::cnrt_check((cnrt), (cnrt).function(__VA_ARGS__), #function)
#define H2_CNNL(cnnl, function, ...) ::h2::mlu::cnnl_check((cnnl), (cnnl).function(__VA_ARGS__), #function)

}  // namespace h2::mlu
