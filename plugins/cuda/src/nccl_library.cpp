#include "nccl_library.hpp"

#include <type_traits>

#include "plugin_error.hpp"
#include "vendor_library.hpp"

namespace h2::cuda {

const NcclLibrary* nccl(std::string* why) {
  // Never unloaded: NCCL registers exit handlers of its own, and a process that unloaded it (at this
  // plugin's unloading, or static destruction) crashed in them at exit.
  return h2::plugin::optional_library<NcclLibrary>(
      {
          .file = "libnccl.so.2",
          .home_variables = {"NCCL_HOME", "CUDA_HOME"},
          .subdirectories = {"lib", "lib64"},
          .install_hint = "install NCCL 2.14 or later (Debian/Ubuntu: libnccl2) or set NCCL_HOME",
          .default_home = "/usr/local/cuda",
      },
      [](const h2::plugin::VendorLibrary& file, NcclLibrary& library) {
        auto bind = [&](auto& slot, const char* symbol) {
          slot = file.function<std::remove_reference_t<decltype(slot)>>(symbol);
        };
        bind(library.get_version, "ncclGetVersion");
        int version = 0;
        library.get_version(&version);
        // Since 2.9 the code is major * 10000 + minor * 100 + patch.
        const int major = version / 10000, minor = version / 100 % 100, patch = version % 100;
        if (major < 2 || (major == 2 && minor < 14))
          h2::plugin::fail(H2_STATUS_RUNTIME_MISSING, file.path() + " is NCCL " + std::to_string(version) +
                                                          "; 2.14 or later is needed (non-blocking communicators)");
        bind(library.get_unique_id, "ncclGetUniqueId");
        bind(library.comm_init_rank_config, "ncclCommInitRankConfig");
        bind(library.comm_get_async_error, "ncclCommGetAsyncError");
        bind(library.comm_finalize, "ncclCommFinalize");
        bind(library.comm_destroy, "ncclCommDestroy");
        bind(library.comm_abort, "ncclCommAbort");
        bind(library.get_error_string, "ncclGetErrorString");
        bind(library.get_last_error, "ncclGetLastError");
        bind(library.all_reduce, "ncclAllReduce");
        bind(library.reduce_scatter, "ncclReduceScatter");
        bind(library.all_gather, "ncclAllGather");
        bind(library.broadcast, "ncclBroadcast");
        bind(library.send, "ncclSend");
        bind(library.recv, "ncclRecv");
        bind(library.group_start, "ncclGroupStart");
        bind(library.group_end, "ncclGroupEnd");
        library.name = "NCCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
      },
      why);
}

}  // namespace h2::cuda
