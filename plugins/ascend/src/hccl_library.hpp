// HCCL, opened at run time from the same CANN installation as AscendCL (acl_library.hpp): the plugin
// offers its collective section (plugin_abi.h section 9) only where libhccl.so is found with every
// function below, so it loads and runs without HCCL, and DiComm then runs every collective itself.
#pragma once

#include <string>

#include "ascend/hccl.h"

namespace h2::ascend {

#define H2_HCCL_FUNCTIONS(X) \
  X(HcclGetRootInfo)         \
  X(HcclCommInitRootInfo)    \
  X(HcclCommDestroy)         \
  X(HcclGetErrorString)      \
  X(HcclAllReduce)           \
  X(HcclReduceScatter)       \
  X(HcclAllGather)           \
  X(HcclBroadcast)           \
  X(HcclSend)                \
  X(HcclRecv)                \
  X(HcclBatchSendRecv)

struct HcclLibrary {
  std::string path;  // the file opened, for messages
  std::string name;  // "HCCL", or "HCCL (emulated)" for H2's test emulator
#define H2_HCCL_MEMBER(name) name##Fn name = nullptr;
  H2_HCCL_FUNCTIONS(H2_HCCL_MEMBER)
#undef H2_HCCL_MEMBER
};

// The library, opened once; nullptr where it is missing or lacks a function, and then `why` says which.
const HcclLibrary* hccl(std::string* why = nullptr);

}  // namespace h2::ascend
