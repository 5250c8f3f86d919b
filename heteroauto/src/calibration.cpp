#include "h2/heteroauto/calibration.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {

namespace {

constexpr double kLowestEfficiency = 1e-3;
constexpr double kLargestFixedShare = 0.9;

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", s);
  return text;
}

// Squared log errors of the runs' predictions, summed: a run twice as slow as predicted weighs as
// much as one twice as fast.
double log_error(const Cluster& cluster, const DeviceType& type, const std::vector<const Calibration*>& runs) {
  double sum = 0;
  for (const Calibration* run : runs)
    sum += std::pow(std::log(predict_calibration_run(cluster, type, *run) / run->step_time_s), 2);
  return sum;
}

// The fit's runs and how well the fitted `type` predicts them.
void describe_runs(const Cluster& cluster, const DeviceType& type, const std::vector<const Calibration*>& runs,
                   CalibrationFit& fit) {
  for (const Calibration* run : runs) {
    fit.measured_step_s.push_back(run->step_time_s);
    fit.source += (fit.source.empty() ? "" : "; ") + run->source;
  }
  fit.rms_log_error = std::sqrt(log_error(cluster, type, runs) / static_cast<double>(runs.size()));
}

// The efficiency of `type` as peak x efficiency (whatever it measured besides) that meets its runs.
double fit_efficiency(const Cluster& cluster, const DeviceType& type, const std::vector<const Calibration*>& runs) {
  DeviceType trial = type;
  trial.measured.clear();
  const auto at = [&](double efficiency) {
    trial.efficiency = efficiency;
    return trial;
  };
  if (runs.size() > 1) {
    // Every run faster than its prediction at the peak, or slower than at 0.001: no efficiency in
    // between explains them.
    const auto all = [&](double efficiency, bool faster) {
      return std::all_of(runs.begin(), runs.end(), [&](const Calibration* run) {
        const double predicted = predict_calibration_run(cluster, at(efficiency), *run);
        return faster ? run->step_time_s < predicted : run->step_time_s > predicted;
      });
    };
    const std::string what =
        "device type '" + type.name + "': calibrated_from: its " + std::to_string(runs.size()) + " runs are all ";
    if (all(1, true))
      throw DescriptionError(what +
                             "faster than HeteroAuto predicts at efficiency 1: its peak_tflops, its nodes' links or "
                             "the measurements are wrong");
    if (all(kLowestEfficiency, false))
      throw DescriptionError(what +
                             "slower than HeteroAuto predicts at efficiency 0.001: the links or the measurements "
                             "are wrong");
    return std::exp(minimise_on_grid([&](double x) { return log_error(cluster, at(std::exp(x)), runs); },
                                     std::log(kLowestEfficiency), 0));
  }
  const Calibration& run = *runs.front();
  const auto predict = [&](double efficiency) { return predict_calibration_run(cluster, at(efficiency), run); };
  const std::string what = "device type '" + type.name + "': calibrated_from (" + run.source + "): ";
  const double at_peak = predict(1), at_lowest = predict(kLowestEfficiency);
  if (at_peak > run.step_time_s)
    throw DescriptionError(what + "the measured step of " + seconds(run.step_time_s) +
                           " is faster than HeteroAuto predicts at efficiency 1 (" + seconds(at_peak) +
                           "): its peak_tflops, its nodes' links or the measurement is wrong");
  if (at_lowest < run.step_time_s)
    throw DescriptionError(what + "the measured step of " + seconds(run.step_time_s) +
                           " is slower than HeteroAuto predicts at efficiency 0.001 (" + seconds(at_lowest) +
                           "): the links or the measurement is wrong");
  // Bisection on the efficiency's logarithm: the predicted step falls as the efficiency rises.
  double low = std::log(kLowestEfficiency), high = 0;
  for (int i = 0; i < 48; ++i) {
    const double middle = (low + high) / 2;
    (predict(std::exp(middle)) > run.step_time_s ? low : high) = middle;
  }
  return std::exp((low + high) / 2);
}

// The fixed share of `type`'s profile of `model` that meets the runs of that model.
double fit_fixed_share(const Cluster& cluster, const DeviceType& type, const std::string& model,
                       const std::vector<const Calibration*>& runs) {
  DeviceType trial = type;
  const auto at = [&](double share) {
    trial.measured.at(model).fixed_share = share;
    return trial;
  };
  // Relative, not exact: predictions the share does not change may still differ in their last bits.
  bool depends = false;
  for (const Calibration* run : runs) {
    const double without = predict_calibration_run(cluster, at(0), *run);
    depends = depends || std::abs(predict_calibration_run(cluster, at(kLargestFixedShare), *run) / without - 1) > 1e-6;
  }
  if (!depends)
    throw DescriptionError("device type '" + type.name + "': calibrated_from: no run of " + model +
                           " depends on its profile's fixed share (none is beyond the profile's micro-batch sizes "
                           "or at a tensor-parallel degree it has no points for): give such a run");
  const double share =
      minimise_on_grid([&](double share) { return log_error(cluster, at(share), runs); }, 0, kLargestFixedShare);
  if (share >= kLargestFixedShare)
    throw DescriptionError("device type '" + type.name + "': calibrated_from: the runs of " + model +
                           " want a fixed share above 0.9 (less than a tenth of a pass growing with its work): the "
                           "profile, the nodes' links or the measurements are wrong");
  return share;
}

}  // namespace

double predict_calibration_run(const Cluster& cluster, const DeviceType& type, const Calibration& run) {
  Cluster alone;
  alone.name = "calibration of " + type.name;
  alone.device_types = {type};
  alone.device_types[0].calibrated_from.clear();
  alone.nics = cluster.nics;
  alone.nodes = {run.nodes};
  alone.device_direct_rdma = cluster.device_direct_rdma;
  alone.device_direct_collectives = cluster.device_direct_collectives;
  const CanonicalCluster canonical = canonicalize(alone);
  const Evaluator evaluator(canonical, run.model, Schedule::one_f_one_b,
                            {.distributed_optimizer = run.distributed_optimizer,
                             .comm_bytes = run.grad_comm_bytes,
                             .overlap = run.overlap_grad_reduce});
  const int replicas = run.nodes.devices() / (run.tp * run.pp);
  const ClassLayout layout{{{0, run.tp, run.pp}}, replicas};
  PartitionedClass pipeline{layout, evaluator.stage_specs(layout)};
  const int layers = run.model.layers;
  for (int k = 0; k < run.pp; ++k) {
    StageSpec& stage = pipeline.stages[static_cast<size_t>(k)];
    stage.layers = layers / run.pp + (k >= run.pp - layers % run.pp ? 1 : 0);
    stage.recompute = run.recompute;
  }
  const int per_replica = static_cast<int>(run.model.global_batch / run.micro_batch) / replicas;
  return evaluator.build_plan({pipeline}, {{per_replica, 0}}, run.micro_batch).prediction.step_time_s;
}

double minimise_on_grid(const std::function<double(double)>& error, double low, double high) {
  double best = low, best_error = error(low);
  const auto search = [&](double from, double to, double step) {
    for (int i = 0; from + i * step <= to + step * 1e-6; ++i)
      if (const double x = std::min(high, from + i * step), e = error(x); e < best_error) {
        best = x;
        best_error = e;
      }
  };
  const double coarse = (high - low) / 100;
  search(low, high, coarse);
  search(std::max(low, best - coarse), std::min(high, best + coarse), coarse / 10);
  return best;
}

nlohmann::json to_json(const CalibrationFit& fit) {
  const bool efficiency = fit.model.empty();
  return {{"device_type", fit.device_type},
          {"fitted", efficiency ? "efficiency" : "fixed_share"},
          {"model", efficiency ? nlohmann::json(nullptr) : nlohmann::json(fit.model)},
          {"value", efficiency ? fit.efficiency : fit.fixed_share},
          {"measured_step_s", fit.measured_step_s},
          {"source", fit.source},
          {"rms_log_error", fit.rms_log_error}};
}

Cluster calibrate_cluster(const Cluster& cluster, std::vector<CalibrationFit>* fits) {
  Cluster calibrated = cluster;
  for (DeviceType& type : calibrated.device_types) {
    if (type.calibrated_from.empty()) continue;
    // Runs of a model the type has a profile of fit that profile; the others the efficiency.
    std::vector<const Calibration*> unprofiled;
    std::map<std::string, std::vector<const Calibration*>> profiled;
    for (const Calibration& run : type.calibrated_from)
      (type.fits_efficiency(run) ? unprofiled : profiled[run.model.name]).push_back(&run);
    if (!unprofiled.empty()) {
      type.efficiency = fit_efficiency(cluster, type, unprofiled);
      CalibrationFit fit{type.name, "", type.efficiency};
      DeviceType as_fitted = type;
      as_fitted.measured.clear();  // the efficiency's runs are predicted from peak x efficiency
      describe_runs(cluster, as_fitted, unprofiled, fit);
      if (fits != nullptr) fits->push_back(fit);
    }
    for (const auto& [model, runs] : profiled) {
      const double share = fit_fixed_share(cluster, type, model, runs);
      type.measured.at(model).fixed_share = share;
      CalibrationFit fit{type.name, model, type.efficiency, share};
      describe_runs(cluster, type, runs, fit);
      if (fits != nullptr) fits->push_back(fit);
    }
  }
  return calibrated;
}

}  // namespace h2::heteroauto
