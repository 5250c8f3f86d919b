// DiTorch: H2 as LibTorch's PrivateUse1 device ("privateuseone" in PyTorch 1.13), so that LibTorch and
// PyTorch programs run on any certified plugin. Loading libh2torch registers the device (its
// allocator on the core's caching allocator, its device guard, its operators and a CPU fallback for
// every other operator); these calls are for programs that want to ask about it.
//
// Which H2 device a LibTorch index means: H2_TORCH_DEVICES ("cpu-reference:0,ascend:0"), or by default
// every device of every loaded plugin in `h2 devices` order. Work on a device runs on one H2 stream of
// that device, in order; copies to the CPU wait for it. H2_TORCH_FALLBACK=error makes an operator
// without an H2 kernel an error naming it instead of running it on the CPU.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "h2/h2.hpp"

namespace torch::nn {
class Module;
}
namespace c10 {
struct Device;
}

namespace h2torch {

// The number of H2 devices LibTorch sees (the runtime is made on first use).
int device_count();
// The H2 device behind LibTorch's index `index`, and the stream its work runs on.
h2::Device& device(int index);
h2::Stream& stream(int index);
// Waits for all work queued on every device.
void synchronize();
// The caching allocator's statistics of device `index` (h2/memory.hpp).
h2::MemoryStats memory_stats(int index);
// How often each operator ran through the CPU fallback ("aten::add.Tensor" -> 3).
std::map<std::string, int64_t> fallback_counts();

// `module`'s parameters and buffers (its children's too) moved to `device`, for C++ programs: LibTorch
// 1.13's Module::to moves a parameter with set_data, which accepts only its built-in dense devices
// (TensorImpl::has_compatible_shallow_copy_type). This does what set_data does without that check.
// Python's Module.to needs nothing of the kind. Move a module before its first backward pass.
void to(torch::nn::Module& module, const c10::Device& device);

}  // namespace h2torch
