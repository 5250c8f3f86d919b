// cross_entropy and its backward, composed on aclnn (plugins/common/composed/loss.cpp): aclnn's
// CrossEntropyLoss family exists, but the composed form keeps the log-sum-exp the ABI returns and
// ignores rows exactly as the ABI says.
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

namespace composed = h2::plugin::composed;

H2_Status op_cross_entropy(H2_Stream* handle, const H2_CrossEntropyArgs* args) {
  return run_composed("cross_entropy", handle, args, composed::cross_entropy);
}

H2_Status op_cross_entropy_backward(H2_Stream* handle, const H2_CrossEntropyBackwardArgs* args) {
  return run_composed("cross_entropy_backward", handle, args, composed::cross_entropy_backward);
}

}  // namespace h2::ascend
