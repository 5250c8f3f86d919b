#include "hccl_library.hpp"

#include <memory>

#include "plugin_error.hpp"
#include "vendor_library.hpp"

namespace h2::ascend {

namespace {

struct Loaded {
  std::unique_ptr<h2::plugin::VendorLibrary> file;
  std::unique_ptr<HcclLibrary> library;
  std::string why;
};

Loaded load() {
  Loaded loaded;
  try {
    loaded.file = std::make_unique<h2::plugin::VendorLibrary>(h2::plugin::VendorSearch{
        .file = "libhccl.so",
        .home_variables = {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"},
        .subdirectories = {"lib64", "lib"},
        .install_hint = "install the CANN toolkit (HCCL comes with it) and source its set_env.sh",
    });
    auto library = std::make_unique<HcclLibrary>();
    library->path = loaded.file->path();
#define H2_HCCL_RESOLVE(name) library->name = loaded.file->function<name##Fn>(#name);
    H2_HCCL_FUNCTIONS(H2_HCCL_RESOLVE)
#undef H2_HCCL_RESOLVE
    loaded.library = std::move(library);
  } catch (const h2::plugin::PluginError& e) {
    loaded.why = e.what();
  }
  return loaded;
}

}  // namespace

const HcclLibrary* hccl(std::string* why) {
  // Never destroyed, so HCCL is never unloaded while its threads may still run (as NCCL in the CUDA
  // plugin).
  static const Loaded& loaded = *new Loaded(load());
  if (why != nullptr) *why = loaded.why;
  return loaded.library.get();
}

}  // namespace h2::ascend
