// NCCL, loaded at run time (plugins/common/vendor_library.hpp) as the CUDA driver is: the plugin
// builds against the toolkit's nccl.h but links nothing of NCCL, so it loads on machines without
// it and offers its collective section (plugin_abi.h section 9) only where libnccl.so.2 is found
// ($NCCL_HOME, $CUDA_HOME, /usr/local/cuda, then the loader's path), of version 2.14 or later
// (non-blocking communicators, ncclCommInitRankConfig and ncclCommFinalize).
#pragma once

#include <nccl.h>

#include <string>

namespace h2::cuda {

struct NcclLibrary {
  std::string name;  // "NCCL 2.28.9"
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRankConfig) comm_init_rank_config = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclCommFinalize) comm_finalize = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetLastError) get_last_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

// The library, loaded once; nullptr where it is missing or too old, and then `why` says which.
const NcclLibrary* nccl(std::string* why = nullptr);

}  // namespace h2::cuda
