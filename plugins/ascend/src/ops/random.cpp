// dropout, uniform and normal on the ABI's Philox streams (plugins/common/composed/random.cpp):
// aclnn's generators (DropoutGenMask, the Inplace{Uniform,Normal} family) document neither their
// algorithm nor their counter layout, so the numbers are drawn on the host and uploaded through
// page-locked staging; aclnn applies them.
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

namespace composed = h2::plugin::composed;

H2_Status op_uniform(H2_Stream* handle, const H2_UniformArgs* args) {
  return run_composed("uniform", handle, args, composed::uniform);
}

H2_Status op_normal(H2_Stream* handle, const H2_NormalArgs* args) {
  return run_composed("normal", handle, args, composed::normal);
}

H2_Status op_dropout(H2_Stream* handle, const H2_DropoutArgs* args) {
  return run_composed("dropout", handle, args, composed::dropout);
}

}  // namespace h2::ascend
