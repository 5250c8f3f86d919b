// Operators of the ABI written once on DeviceMath (device_math.hpp), for the accelerator plugins whose
// vendor library lacks them or cannot do them exactly as the ABI says:
// - AdamW, gradient norms, clipping and loss-scale unscaling in FP32 with FP64 scalars (vendor fused
//   optimizers take FLOAT betas, which cost AdamW's second moment 1e-5 relative);
// - cross-entropy from the row's log-sum-exp, with ignored rows and label smoothing;
// - dropout, uniform and normal on the ABI's Philox streams, which no vendor generator documents: the
//   numbers are drawn on the host from seed and offset alone (never device data) and uploaded;
// - rotary embedding from host cos/sin tables;
// - attention with a causal mask and grouped-query heads, from batched matmuls and the row statistics,
//   for libraries whose fused attention takes other layouts;
// - the causal mask itself.
// Each enqueues on the DeviceMath's stream and returns without waiting for the device.
#pragma once

#include "device_math.hpp"
#include "plugin_error.hpp"

namespace h2::plugin::composed {

void adamw(DeviceMath& math, const H2_AdamWArgs& args);
void grad_norm(DeviceMath& math, const H2_GradNormArgs& args);
void clip_by_norm(DeviceMath& math, const H2_ClipByNormArgs& args);
void unscale(DeviceMath& math, const H2_UnscaleArgs& args);

void cross_entropy(DeviceMath& math, const H2_CrossEntropyArgs& args);
void cross_entropy_backward(DeviceMath& math, const H2_CrossEntropyBackwardArgs& args);

void dropout(DeviceMath& math, const H2_DropoutArgs& args);
void uniform(DeviceMath& math, const H2_UniformArgs& args);
void normal(DeviceMath& math, const H2_NormalArgs& args);

void rotary(DeviceMath& math, const H2_RotaryArgs& args);

void attention(DeviceMath& math, const H2_AttentionArgs& args);
void attention_backward(DeviceMath& math, const H2_AttentionBackwardArgs& args);

// Writes the BOOL [rows, cols] causal mask of a softmax or attention: true where j > i + cols - rows
// (query i of the last `rows` positions sees keys up to its own).
void causal_mask(DeviceMath& math, const H2_Tensor& mask);

}  // namespace h2::plugin::composed

// Defines a plugin's operator slot op_<name> as composed::<name> on the plugin's DeviceMath `Math`,
// which is made from the slot's stream handle (and keeps the stream alive while it exists).
#define H2_COMPOSED_OP(Math, name, Args)                     \
  H2_Status op_##name(H2_Stream* handle, const Args* args) { \
    return ::h2::plugin::guarded(#name, [&] {                \
      Math math(handle);                                     \
      ::h2::plugin::composed::name(math, *args);             \
    });                                                      \
  }
