// Which device this rank uses: H2_DEVICE=PLUGIN[:INDEX] (set by `h2 launch --devices`; PLUGIN is a
// name or a plugin file's path), where a
// plugin without an index means device (local rank mod device count); without H2_DEVICE, the first
// loaded plugin's device (local rank mod its device count).
#pragma once

#include <string>

#include "h2/dicomm/bootstrap.hpp"
#include "h2/runtime.hpp"

namespace h2::dicomm {

// Loads what the choice needs into `runtime`'s view; throws h2::Error naming H2_DEVICE's value and
// the plugin's state when the device cannot be had.
Device select_device(const Runtime& runtime, const RankInfo& info);
// The plugins select_device needs loaded: H2_DEVICE's plugin, or all when it is not set.
RuntimeOptions runtime_options_for_device();

// The same for a PLUGIN[:INDEX] `device` a rank chose itself ("": as H2_DEVICE unset), so that a
// program need not set H2_DEVICE in its own environment to choose.
Device select_device(const Runtime& runtime, const RankInfo& info, const std::string& device);
RuntimeOptions runtime_options_for_device(const std::string& device);
// H2_DEVICE's value; "" when it is not set.
std::string device_from_environment();

}  // namespace h2::dicomm
