// Measures a model on one device the way HeteroAuto's cost model takes it (a device type's
// "measured" profile): one transformer layer's, the embedding's and the head's (final norm, LM head,
// loss) forward and backward time at each micro-batch size, as stages of their own, and the
// optimizer's time per parameter (gradient norm, AdamW, zeroing). The three parts take turns, one
// repeat each per round, after warm-up rounds; each time is the median of its repeats, and the
// profile's "spread" says how far the repeats lie apart (the layer's interquartile range over its
// median, the widest over the micro-batch sizes), which bounds what a prediction from it can mean.
// `h2 profile` and `h2 train --profile` run this on every device of a cluster at once, one process
// per device.
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
// "head": [...], "optimizer_ns_per_parameter": x, "spread": s, "repeats": n}. `barrier` (optional) is called before
// each measured part, so that devices measured at once contend for shared cores as they do in training.
nlohmann::json profile_device(const heteroauto::Model& model, const Device& device, Stream& stream,
                              const ProfileSettings& settings, const std::function<void()>& barrier = {});

// The mean over a device type's devices of their profiles, point by point (the "device" field
// dropped); its spread is the widest of theirs, and its "uncertainty" how far its medians may be off:
// from the spread and the repeats, or from how far its devices' layer times lie apart.
nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices);

// (third quartile - first quartile) / median; 0 for fewer than two values.
double relative_spread(std::vector<double> values);

}  // namespace h2::heteropp
