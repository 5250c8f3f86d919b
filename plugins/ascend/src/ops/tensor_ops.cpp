#include "tensor_ops.hpp"

namespace h2::ascend {

// The column minus the row index (two aranges, broadcast) compared with cols - rows.
void write_causal_mask(Stream& stream, const H2_Tensor& mask) {
  TensorOps ops{stream};
  const int64_t rows = mask.shape[0], cols = mask.shape[1];
  ScratchTensor column(stream, H2_DTYPE_F32, {1, cols}), row(stream, H2_DTYPE_F32, {rows, 1});
  ScratchTensor distance(stream, H2_DTYPE_F32, {rows, cols});
  ops.arange(reshaped(column.tensor, {cols}), 0.0, 1.0);
  ops.arange(reshaped(row.tensor, {rows}), 0.0, 1.0);
  ops.add(distance.tensor, column.tensor, row.tensor, 1.0, true);
  ops.scalar_op("aclnnGtScalar", ops.nn.aclnnGtScalarWorkspace, ops.nn.aclnnGtScalar, mask, distance.tensor,
                static_cast<double>(cols - rows));
}

}  // namespace h2::ascend
