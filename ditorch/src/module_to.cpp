// h2torch::to: a C++ module's parameters and buffers moved onto an H2 device (see h2torch.hpp for why
// Module::to cannot).
#include <torch/nn/module.h>
#include <torch/torch.h>

#include "h2torch/h2torch.hpp"

namespace h2torch {

void to(torch::nn::Module& module, const c10::Device& device) {
  const torch::NoGradGuard no_grad;
  for (at::Tensor& tensor : module.parameters(/*recurse=*/true)) {
    const at::Tensor moved = tensor.to(device);
    tensor.unsafeGetTensorImpl()->shallow_copy_from(moved.getIntrusivePtr());
  }
  for (at::Tensor& tensor : module.buffers(/*recurse=*/true)) {
    const at::Tensor moved = tensor.to(device);
    tensor.unsafeGetTensorImpl()->shallow_copy_from(moved.getIntrusivePtr());
  }
}

}  // namespace h2torch
