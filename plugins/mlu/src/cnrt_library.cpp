#include "cnrt_library.hpp"

namespace h2::mlu {

h2::plugin::VendorSearch neuware_search(const char* file) {
  return {
      .file = file,
      .home_variables = {"NEUWARE_HOME"},
      .subdirectories = {"lib64", "lib"},
      .install_hint = "install Cambricon's Neuware (CNToolkit and CNNL) and set NEUWARE_HOME",
      .default_home = "/usr/local/neuware",
  };
}

#define H2_CNRT_RESOLVE(name) , name(library.function<name##Fn>(#name))
CnrtLibrary::CnrtLibrary() : library(neuware_search("libcnrt.so")) H2_CNRT_FUNCTIONS(H2_CNRT_RESOLVE) {}
#undef H2_CNRT_RESOLVE

}  // namespace h2::mlu
