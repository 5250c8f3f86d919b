#include "cnnl_call.hpp"

namespace h2::mlu {

using h2::plugin::fail;

cnnlDataType_t cnnl_dtype(uint32_t dtype) {
  switch (dtype) {
    case H2_DTYPE_F32: return CNNL_DTYPE_FLOAT;
    case H2_DTYPE_F16: return CNNL_DTYPE_HALF;
    case H2_DTYPE_BF16: return CNNL_DTYPE_BFLOAT16;
    case H2_DTYPE_F64: return CNNL_DTYPE_DOUBLE;
    case H2_DTYPE_I32: return CNNL_DTYPE_INT32;
    case H2_DTYPE_I64: return CNNL_DTYPE_INT64;
    case H2_DTYPE_U8: return CNNL_DTYPE_UINT8;
    case H2_DTYPE_BOOL: return CNNL_DTYPE_BOOL;
    default: fail(H2_STATUS_UNSUPPORTED, "dtype " + std::to_string(dtype) + " has no cnnlDataType_t");
  }
}

TensorDesc::TensorDesc(const H2_Tensor& tensor) {
  if (tensor.data == nullptr) return;
  const CnnlLibrary& cnnl = runtime().cnnl();
  H2_CNNL(cnnl, cnnlCreateTensorDescriptor, &desc_);
  const cnnlStatus_t set = cnnl.cnnlSetTensorDescriptorEx_v2(
      desc_, CNNL_LAYOUT_ARRAY, cnnl_dtype(tensor.dtype), static_cast<int>(tensor.rank), tensor.shape, tensor.strides);
  if (set != CNNL_STATUS_SUCCESS) {
    cnnl.cnnlDestroyTensorDescriptor(desc_);
    cnnl_check(cnnl, set, "cnnlSetTensorDescriptorEx_v2");
  }
}

TensorDesc::~TensorDesc() {
  if (desc_ != nullptr) runtime().cnnl().cnnlDestroyTensorDescriptor(desc_);
}

void TensorDesc::set_onchip(cnnlDataType_t dtype) {
  H2_CNNL(runtime().cnnl(), cnnlSetTensorDescriptorOnchipDataType, desc_, dtype);
}

cnnlHandle_t handle_of(Stream& stream) {
  runtime().bind(stream.device);
  return stream.cnnl;
}

}  // namespace h2::mlu
