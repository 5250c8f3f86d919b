// Fitting a device type to homogeneous runs (its "calibrated_from"), so that no heterogeneous
// cluster is needed: one published or measured homogeneous step per run, and what is fitted is then
// used unchanged wherever the type appears. search_plans calibrates the cluster it is given before
// it plans. Two things can be fitted:
// - the efficiency of a type without a measured profile for the run's model: the efficiency at which
//   HeteroAuto predicts the run's step (bisection: a predicted step only gets shorter as the
//   efficiency rises), or with several runs the one with the least squared log error over them;
// - the fixed share of the measured profile of the run's model (MeasuredProfile::fixed_share), which
//   a profile at one micro-batch size cannot show: the share in [0, 0.9] with the least squared log
//   error over the runs of that model. The runs must include one that the share changes (beyond the
//   profile's micro-batch sizes, or at a tensor-parallel degree it has no points for), and a share
//   above 0.9 is refused, as is an efficiency no run can meet.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "h2/heteroauto/description.hpp"

namespace h2::heteroauto {

struct CalibrationFit {
  std::string device_type;
  std::string model;      // the profile's model for a fixed share; empty for the efficiency
  double efficiency = 0;  // fitted (or the type's, for a fixed share)
  double fixed_share = 0;
  std::vector<double> measured_step_s;  // the runs'
  std::string source;                   // the runs' sources, joined
  // How far the runs' predictions stay from their measurements with what was fitted: the root mean
  // square of their log ratios (0.1: about 10%). Large: the model cannot explain the runs.
  double rms_log_error = 0;
};

// HeteroAuto's predicted step time for a homogeneous run of `type`, as the type is given (its
// efficiency and measured profiles): the run's nodes alone, its layout with the layers split evenly
// (the remainder on the last stages), its micro-batches spread evenly over the replicas.
double predict_calibration_run(const Cluster& cluster, const DeviceType& type, const Calibration& run);

// The x in [low, high] with the least error(x): on a grid of a hundredth of the range, then of a
// thousandth around the best point (the error need not be monotonic or smooth).
double minimise_on_grid(const std::function<double(double)>& error, double low, double high);

// The cluster with every calibrated type fitted, and what was fitted. Throws DescriptionError naming
// the type when no efficiency in [0.001, 1] meets a single run (then its peak, its links or the
// measurement are wrong), or when no run of a profiled model depends on the fixed share.
Cluster calibrate_cluster(const Cluster& cluster, std::vector<CalibrationFit>* fits = nullptr);

// For programs (h2 plan --json): {"device_type", "fitted": "efficiency" or "fixed_share", "model"
// (null for the efficiency), "value", "measured_step_s", "source", "rms_log_error"}.
nlohmann::json to_json(const CalibrationFit& fit);

}  // namespace h2::heteroauto
