// Measures a model on one device the way HeteroAuto's cost model takes it (a device type's
// "measured" profile): one transformer layer's, the embedding's and the head's (final norm, LM head,
// loss) forward and backward time at each micro-batch size, as stages of their own, and the
// optimizer's time per parameter (gradient norm, AdamW, zeroing). Each time is the median of the
// timed iterations after warm-up. `h2 profile` and `h2 train --profile` run this on every device of a
// cluster at once, one process per device.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "h2/device.hpp"
#include "h2/heteroauto/description.hpp"
#include "h2/stream.hpp"

namespace h2::heteropp {

struct ProfileSettings {
  std::vector<int> micro_batches;  // the sizes to measure
  int warmup = 2;
  int iterations = 5;
};

// {"device": label, "layer": [{"micro_batch", "forward_ms", "backward_ms"}...], "embedding": [...],
// "head": [...], "optimizer_ns_per_parameter": x}. `barrier` (optional) is called before each
// measured part, so that devices measured at once contend for shared cores as they do in training.
nlohmann::json profile_device(const heteroauto::Model& model, const Device& device, Stream& stream,
                              const ProfileSettings& settings, const std::function<void()>& barrier = {});

// The mean over a device type's devices of their profiles, point by point (the "device" field dropped).
nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices);

}  // namespace h2::heteropp
