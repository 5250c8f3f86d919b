#include "tensor_ops.hpp"

namespace h2::ascend {

// The column minus the row index (two aranges, broadcast) compared with cols - rows.
void write_causal_mask(Stream& stream, const H2_Tensor& mask) {
  const AclnnLibrary& nn = runtime().aclnn();
  const int64_t rows = mask.shape[0], cols = mask.shape[1];
  ScratchTensor column(stream, H2_DTYPE_F32, {1, cols}), row(stream, H2_DTYPE_F32, {rows, 1});
  ScratchTensor distance(stream, H2_DTYPE_F32, {rows, cols});
  for (ScratchTensor* index : {&column, &row}) {
    H2_Tensor flat = index->tensor;  // the arange as the 1-D tensor it is
    flat.rank = 1;
    flat.shape[0] = index == &column ? cols : rows;
    flat.strides[0] = 1;
    AclTensor out(flat);
    const double count = static_cast<double>(flat.shape[0]);
    AclScalar start(0.0), end(count - 0.5), step(1.0);
    run_aclnn(
        stream, "aclnnArange",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnArangeWorkspace(start.get(), end.get(), step.get(), out.get(), size, executor);
        },
        nn.aclnnArange);
  }
  {
    AclTensor j(column.tensor), i(row.tensor), d(distance.tensor);
    AclScalar one(1.0);
    run_aclnn(
        stream, "aclnnSub",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnSubWorkspace(j.get(), i.get(), one.get(), d.get(), size, executor);
        },
        nn.aclnnSub);
  }
  {
    AclTensor d(distance.tensor), m(mask);
    AclScalar threshold(static_cast<double>(cols - rows));
    run_aclnn(
        stream, "aclnnGtScalar",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnGtScalarWorkspace(d.get(), threshold.get(), m.get(), size, executor);
        },
        nn.aclnnGtScalar);
  }
}

H2_Tensor transposed(H2_Tensor t) {
  std::swap(t.shape[t.rank - 1], t.shape[t.rank - 2]);
  std::swap(t.strides[t.rank - 1], t.strides[t.rank - 2]);
  return t;
}

}  // namespace h2::ascend
