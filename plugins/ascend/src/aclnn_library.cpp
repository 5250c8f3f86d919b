#include "aclnn_library.hpp"

namespace h2::ascend {
namespace {

h2::plugin::VendorSearch aclnn_search(const char* file) {
  return {
      .file = file,
      .home_variables = {"ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"},
      .subdirectories = {"lib64", "lib"},
      .install_hint = "install the CANN toolkit (with its operator package) and source its set_env.sh",
  };
}

}  // namespace

#define H2_NNOPBASE_RESOLVE(name) , name(nnopbase.function<name##Fn>(#name))
#define H2_OPAPI_RESOLVE(op) \
  , op##Workspace(opapi.function<op##GetWorkspaceSizeFn>(#op "GetWorkspaceSize")), op(opapi.function<aclnnRunFn>(#op))
AclnnLibrary::AclnnLibrary()
    : nnopbase(aclnn_search("libnnopbase.so")),
      opapi(aclnn_search("libopapi.so")) H2_NNOPBASE_FUNCTIONS(H2_NNOPBASE_RESOLVE)
          H2_OPAPI_OPERATORS(H2_OPAPI_RESOLVE) {}
#undef H2_NNOPBASE_RESOLVE
#undef H2_OPAPI_RESOLVE

}  // namespace h2::ascend
