// Measures a model on one device the way HeteroAuto's cost model takes it (a device type's
// "measured" profile): one transformer layer's, the embedding's and the head's (final norm, LM head,
// loss) forward and backward time at each micro-batch size, as stages of their own, and the
// optimizer's time per parameter (gradient norm, AdamW, zeroing). Every round measures each part at
// each size once, after warm-up rounds, so that a machine whose speed drifts slows them all alike;
// each time is the mean of its repeats without the fastest and slowest tenth (a training step
// averages over the machine's drift as a mean does), and the profile's "spread" says how far the
// repeats lie apart (the layer's interquartile range over its median, the widest over the sizes).
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

// Devices measured together take turns: `turns` groups, this device in group `turn`; every device
// calls `barrier` (when given) before each group's turn at each part, so that a group measures while
// the others wait. Devices that share a machine's cores are grouped a coreful at a time, so that each
// is measured at full speed, and the planner charges the sharing (heteroauto's SharedHost).
struct ProfileTurns {
  int turns = 1, turn = 0;
  std::function<void()> barrier;
};

// {"device": label, "layer": [{"micro_batch", "forward_ms", "backward_ms"}...], "embedding": [...],
// "head": [...], "optimizer_ns_per_parameter": x, "update_ns_per_parameter": u, "spread": s,
// "repeats": n, "standard_error": e}: x the optimizer's whole step per parameter, u its norm and
// AdamW alone, e the widest relative standard error of the layer's mean time over the sizes.
nlohmann::json profile_device(const heteroauto::Model& model, const Device& device, Stream& stream,
                              const ProfileSettings& settings, const ProfileTurns& turns = {});

// The mean over a device type's devices of their profiles, point by point (the "device" field
// and "standard_error" dropped); its spread is the widest of theirs, and its "uncertainty" how far its
// times may be off: its devices' widest standard error, or half the range of their layer times.
nlohmann::json mean_profile(const std::vector<nlohmann::json>& devices);

// (third quartile - first quartile) / median; 0 for fewer than two values.
double relative_spread(std::vector<double> values);

}  // namespace h2::heteropp
