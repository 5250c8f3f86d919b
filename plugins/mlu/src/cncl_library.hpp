// CNCL, opened at run time from the same Neuware installation as CNRT (cnrt_library.hpp): the plugin
// offers its collective section (plugin_abi.h section 9) only where libcncl.so is found with every
// function below, so it loads and runs without CNCL, and DiComm then runs every collective itself.
#pragma once

#include <string>

#include "mlu/cncl.h"

namespace h2::mlu {

#define H2_CNCL_FUNCTIONS(X) \
  X(cnclGetLibVersion)       \
  X(cnclGetErrorStr)         \
  X(cnclGetCliqueId)         \
  X(cnclInitComms)           \
  X(cnclDestroyComms)        \
  X(cnclAbortComm)           \
  X(cnclAllReduce)           \
  X(cnclReduceScatter)       \
  X(cnclAllGather)           \
  X(cnclBroadcast)           \
  X(cnclSend)                \
  X(cnclRecv)                \
  X(cnclGroupStart)          \
  X(cnclGroupEnd)

struct CnclLibrary {
  std::string name;  // "CNCL 1.25.0", with " (emulated)" for H2's test emulator
#define H2_CNCL_MEMBER(name) name##Fn name = nullptr;
  H2_CNCL_FUNCTIONS(H2_CNCL_MEMBER)
#undef H2_CNCL_MEMBER
};

// The library, opened once; nullptr where it is missing or lacks a function, and then `why` says which.
const CnclLibrary* cncl(std::string* why = nullptr);

}  // namespace h2::mlu
