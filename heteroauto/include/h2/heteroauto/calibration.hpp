// Fitting a device type's efficiency to a homogeneous run (its "calibrated_from"): the efficiency at
// which HeteroAuto predicts the run's measured step time, found by bisection (a predicted step only
// gets shorter as the efficiency rises). The run needs no heterogeneous cluster: one published or
// measured homogeneous step per type, and the fitted efficiency is then used unchanged wherever the
// type appears. search_plans calibrates the cluster it is given before it plans.
#pragma once

#include <string>
#include <vector>

#include "h2/heteroauto/description.hpp"

namespace h2::heteroauto {

struct CalibrationFit {
  std::string device_type;
  double efficiency = 0;  // fitted
  double measured_step_s = 0;
  std::string source;
};

// HeteroAuto's predicted step time for `type`'s calibration run (it must have one) at `efficiency`:
// the run's nodes alone, its layout with the layers split evenly (the remainder on the last
// stages), its micro-batches spread evenly over the replicas.
double predict_calibration_run(const Cluster& cluster, const DeviceType& type, double efficiency);

// The cluster with every calibrated type's efficiency fitted, and what was fitted. Throws
// DescriptionError naming the type when no efficiency in [0.001, 1] meets its measurement (then its
// peak, its links or the measurement are wrong).
Cluster calibrate_cluster(const Cluster& cluster, std::vector<CalibrationFit>* fits = nullptr);

}  // namespace h2::heteroauto
