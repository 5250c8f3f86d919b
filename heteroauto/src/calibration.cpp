#include "h2/heteroauto/calibration.hpp"

#include <cmath>
#include <cstdio>

#include "h2/heteroauto/layout.hpp"

namespace h2::heteroauto {

namespace {

constexpr double kLowestEfficiency = 1e-3;

std::string seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", s);
  return text;
}

}  // namespace

double predict_calibration_run(const Cluster& cluster, const DeviceType& type, double efficiency) {
  const Calibration& run = type.calibrated_from.value();
  Cluster alone;
  alone.name = "calibration of " + type.name;
  alone.device_types = {type};
  alone.device_types[0].efficiency = efficiency;
  alone.device_types[0].measured.clear();  // the fit is of peak x efficiency, whatever was measured besides
  alone.device_types[0].calibrated_from.reset();
  alone.nics = cluster.nics;
  alone.nodes = {run.nodes};
  alone.device_direct_rdma = cluster.device_direct_rdma;
  alone.device_direct_collectives = cluster.device_direct_collectives;
  const CanonicalCluster canonical = canonicalize(alone);
  const Evaluator evaluator(canonical, run.model, Schedule::one_f_one_b,
                            {.comm_bytes = run.grad_comm_bytes, .overlap = run.overlap_grad_reduce});
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

Cluster calibrate_cluster(const Cluster& cluster, std::vector<CalibrationFit>* fits) {
  Cluster calibrated = cluster;
  for (DeviceType& type : calibrated.device_types) {
    if (!type.calibrated_from) continue;
    const Calibration& run = *type.calibrated_from;
    const auto predict = [&](double efficiency) { return predict_calibration_run(cluster, type, efficiency); };
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
    type.efficiency = std::exp((low + high) / 2);
    if (fits != nullptr) fits->push_back({type.name, type.efficiency, run.step_time_s, run.source});
  }
  return calibrated;
}

}  // namespace h2::heteroauto
