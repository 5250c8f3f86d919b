// cross_entropy and its backward, composed on aclnn (plugins/common/composed/loss.cpp): the composed
// form keeps the log-sum-exp the ABI returns and ignores rows exactly as the ABI says.
#include "acl_math.hpp"
#include "op_table.hpp"

namespace h2::ascend {

H2_COMPOSED_OP(AclMath, cross_entropy, H2_CrossEntropyArgs)
H2_COMPOSED_OP(AclMath, cross_entropy_backward, H2_CrossEntropyBackwardArgs)

}  // namespace h2::ascend
