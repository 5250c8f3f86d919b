#include "acl_library.hpp"

namespace h2::ascend {
namespace {

h2::plugin::VendorSearch acl_search() {
  return {
      .file = "libascendcl.so",
      .home_variables = {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"},
      .subdirectories = {"lib64", "lib"},
      .install_hint = "install the CANN toolkit and source its set_env.sh",
  };
}

}  // namespace

#define H2_ACL_RESOLVE(name) , name(library.function<name##Fn>(#name))
AclLibrary::AclLibrary()
    : library(acl_search()) H2_ACL_FUNCTIONS(H2_ACL_RESOLVE),
      aclrtIpcMemGetExportKey(library.optional_function<aclrtIpcMemGetExportKeyFn>("aclrtIpcMemGetExportKey")),
      aclrtIpcMemImportByKey(library.optional_function<aclrtIpcMemImportByKeyFn>("aclrtIpcMemImportByKey")),
      aclrtIpcMemClose(library.optional_function<aclrtIpcMemCloseFn>("aclrtIpcMemClose")) {}
#undef H2_ACL_RESOLVE

}  // namespace h2::ascend
