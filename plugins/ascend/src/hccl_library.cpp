#include "hccl_library.hpp"

#include "vendor_library.hpp"

namespace h2::ascend {

const HcclLibrary* hccl(std::string* why) {
  return h2::plugin::optional_library<HcclLibrary>(
      {
          .file = "libhccl.so",
          .home_variables = {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"},
          .subdirectories = {"lib64", "lib"},
          .install_hint = "install the CANN toolkit (HCCL comes with it) and source its set_env.sh",
      },
      [](const h2::plugin::VendorLibrary& file, HcclLibrary& library) {
        library.path = file.path();
        library.name = "HCCL" + file.emulated_suffix();
#define H2_HCCL_RESOLVE(name) library.name = file.function<name##Fn>(#name);
        H2_HCCL_FUNCTIONS(H2_HCCL_RESOLVE)
#undef H2_HCCL_RESOLVE
      },
      why);
}

}  // namespace h2::ascend
