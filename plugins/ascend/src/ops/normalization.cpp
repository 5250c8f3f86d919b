// layer_norm and rms_norm with their backwards on aclnnLayerNorm(Backward), aclnnRmsNorm and
// aclnnRmsNormGrad. aclnn's statistics keep the normalized dimension (size 1), so the ABI's mean and
// rstd are described with a trailing dimension of 1. aclnnRmsNorm needs a weight and aclnnRmsNormGrad
// an FP32 weight gradient: ones and an FP32 scratch stand in when the ABI call has none.
#include <optional>

#include "aclnn_call.hpp"
#include "op_table.hpp"
#include "tensor_ops.hpp"

namespace h2::ascend {

using h2::plugin::guarded;

namespace {

int64_t last_dimension(const H2_Tensor& x) {
  return x.rank == 0 ? 1 : x.shape[x.rank - 1];
}

}  // namespace

H2_Status op_layer_norm(H2_Stream* handle, const H2_LayerNormArgs* args) {
  return guarded("layer_norm", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), y(args->y);
    AclTensor weight(args->weight), bias(args->bias);
    AclTensor mean(appended_dimension(args->mean, 1, 1)), rstd(appended_dimension(args->rstd, 1, 1));
    AclIntArray normalized({last_dimension(args->x)});
    run_aclnn(
        *stream, "aclnnLayerNorm",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnLayerNormWorkspace(x.get(), normalized.get(), weight.get(), bias.get(), args->eps, y.get(),
                                            mean.get(), rstd.get(), size, executor);
        },
        nn.aclnnLayerNorm);
  });
}

H2_Status op_layer_norm_backward(H2_Stream* handle, const H2_LayerNormBackwardArgs* args) {
  return guarded("layer_norm_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    AclTensor x(args->x), dy(args->dy), mean(appended_dimension(args->mean, 1, 1)),
        rstd(appended_dimension(args->rstd, 1, 1));
    AclTensor weight(args->weight), dx(args->dx), dweight(args->dweight), dbias(args->dbias);
    AclIntArray normalized({last_dimension(args->x)});
    const bool mask[3] = {dx.get() != nullptr, dweight.get() != nullptr, dbias.get() != nullptr};
    aclBoolArray* output_mask = nn.aclCreateBoolArray(mask, 3);
    try {
      run_aclnn(
          *stream, "aclnnLayerNormBackward",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnLayerNormBackwardWorkspace(dy.get(), x.get(), normalized.get(), mean.get(), rstd.get(),
                                                      weight.get(), nullptr, output_mask, dx.get(), dweight.get(),
                                                      dbias.get(), size, executor);
          },
          nn.aclnnLayerNormBackward);
    } catch (...) {
      nn.aclDestroyBoolArray(output_mask);
      throw;
    }
    nn.aclDestroyBoolArray(output_mask);
  });
}

H2_Status op_rms_norm(H2_Stream* handle, const H2_RmsNormArgs* args) {
  return guarded("rms_norm", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    std::optional<ScratchTensor> ones, rstd_scratch;
    if (args->weight.data == nullptr) {
      ones.emplace(*stream, args->x.dtype, std::vector<int64_t>{last_dimension(args->x)});
      TensorOps{*stream}.fill(ones->tensor, 1.0);
    }
    H2_Tensor rstd_tensor = args->rstd;
    if (rstd_tensor.data == nullptr) {
      std::vector<int64_t> rows(args->x.shape, args->x.shape + (args->x.rank > 0 ? args->x.rank - 1 : 0));
      rstd_scratch.emplace(*stream, H2_DTYPE_F32, rows);
      rstd_tensor = rstd_scratch->tensor;
    }
    AclTensor x(args->x), y(args->y), gamma(ones ? ones->tensor : args->weight),
        rstd(appended_dimension(rstd_tensor, 1, 1));
    run_aclnn(
        *stream, "aclnnRmsNorm",
        [&](uint64_t* size, aclOpExecutor** executor) {
          return nn.aclnnRmsNormWorkspace(x.get(), gamma.get(), args->eps, y.get(), rstd.get(), size, executor);
        },
        nn.aclnnRmsNorm);
  });
}

H2_Status op_rms_norm_backward(H2_Stream* handle, const H2_RmsNormBackwardArgs* args) {
  return guarded("rms_norm_backward", [&] {
    auto stream = runtime().stream(handle);
    const AclnnLibrary& nn = runtime().aclnn();
    const std::vector<int64_t> width{last_dimension(args->x)};
    std::optional<ScratchTensor> ones, dgamma_scratch;
    if (args->weight.data == nullptr) {
      ones.emplace(*stream, args->x.dtype, width);
      TensorOps{*stream}.fill(ones->tensor, 1.0);
    }
    const bool direct = args->dweight.data != nullptr && args->dweight.dtype == H2_DTYPE_F32;
    if (!direct) dgamma_scratch.emplace(*stream, H2_DTYPE_F32, width);
    {
      AclTensor x(args->x), dy(args->dy), dx(args->dx), rstd(appended_dimension(args->rstd, 1, 1));
      AclTensor gamma(ones ? ones->tensor : args->weight), dgamma(direct ? args->dweight : dgamma_scratch->tensor);
      run_aclnn(
          *stream, "aclnnRmsNormGrad",
          [&](uint64_t* size, aclOpExecutor** executor) {
            return nn.aclnnRmsNormGradWorkspace(dy.get(), x.get(), rstd.get(), gamma.get(), dx.get(), dgamma.get(),
                                                size, executor);
          },
          nn.aclnnRmsNormGrad);
    }
    if (!direct && args->dweight.data != nullptr) copy_tensor(*stream, args->dweight, dgamma_scratch->tensor);
  });
}

}  // namespace h2::ascend
