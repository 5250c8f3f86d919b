#include "cncl_library.hpp"

#include "cnrt_library.hpp"
#include "vendor_library.hpp"

namespace h2::mlu {

const CnclLibrary* cncl(std::string* why) {
  return h2::plugin::optional_library<CnclLibrary>(
      neuware_search("libcncl.so"),
      [](const h2::plugin::VendorLibrary& file, CnclLibrary& library) {
#define H2_CNCL_RESOLVE(name) library.name = file.function<name##Fn>(#name);
        H2_CNCL_FUNCTIONS(H2_CNCL_RESOLVE)
#undef H2_CNCL_RESOLVE
        int major = 0, minor = 0, patch = 0;
        library.cnclGetLibVersion(&major, &minor, &patch);
        library.name = "CNCL " + std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch) +
                       file.emulated_suffix();
      },
      why);
}

}  // namespace h2::mlu
