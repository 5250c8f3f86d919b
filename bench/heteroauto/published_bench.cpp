// HeteroAuto's predictions against published measurements (bench/heteroauto/published/): for every
// trial of a case, the configuration as it ran (tensor, data and pipeline parallelism, micro-batch,
// layers per stage, devices in the run's rank order or on the nodes the trial names for each
// replica's stages) is predicted under HeteroAuto's cost model and
// simulator, with the device types calibrated on homogeneous measurements only (the case's profiles
// or calibrated_from), and printed next to the measured step time and the publication's own
// prediction. A case's "runtime": "deepspeed" simulates that runtime's pipeline sends (PipelineRuntime). Per
// case: the Spearman rank correlation of predicted and measured times (goal >= 0.9),
// and for heterogeneous cases how many trials come within 20% (goal: all).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>

#include "h2/heteroauto/calibration.hpp"
#include "h2/heteroauto/layout.hpp"

namespace {

using namespace h2::heteroauto;
using nlohmann::json;
namespace fs = std::filesystem;

struct Trial {
  int index = 0, micro_batch = 1, tp = 1, dp = 1, pp = 1;
  std::vector<int> layers;  // transformer layers per stage
  std::optional<double> measured_s, published_prediction_s;
  // Where trials of a case differ in more than the layout: their global batch, and the node count of
  // a case whose cluster is one node group.
  std::optional<int64_t> global_batch;
  std::optional<int> nodes;
  // Where a trial names its nodes (a cluster whose every node is its own group): for each data-parallel
  // replica, the node of each of its stages. Each stage then takes `tp` devices of its node.
  std::vector<std::vector<std::string>> replicas;
};

// Average ranks (ties share theirs), then Pearson's correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ranks = [](const std::vector<double>& v) {
    std::vector<size_t> order(v.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return v[x] < v[y]; });
    std::vector<double> rank(v.size());
    for (size_t i = 0; i < order.size();) {
      size_t j = i;
      while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
      for (size_t k = i; k <= j; ++k) rank[order[k]] = (static_cast<double>(i + j) / 2) + 1;
      i = j + 1;
    }
    return rank;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return cov / std::sqrt(va * vb);
}

// The trial's configuration as HeteroAuto pipeline classes, its devices dealt out in the rank order
// rank = tp + TP x dp + TP x DP x pp over the description's node groups in order; or why it cannot
// be (the reason).
struct Configuration {
  std::vector<PartitionedClass> classes;
  std::vector<MicroBatchSplit> split;
  std::string unsupported;
};

Configuration configure(const Evaluator& evaluator, const Model& model, const Trial& t) {
  const Cluster& cluster = evaluator.cluster();
  std::vector<int> group_start{0};
  for (const NodeGroup& g : cluster.nodes) group_start.push_back(group_start.back() + g.devices());
  Configuration result;
  if (t.tp * t.dp * t.pp != group_start.back()) {
    result.unsupported =
        "uses " + std::to_string(t.tp * t.dp * t.pp) + " of the " + std::to_string(group_start.back()) + " devices";
    return result;
  }
  const auto group_of = [&](int rank) {
    return static_cast<int>(std::upper_bound(group_start.begin(), group_start.end(), rank) - group_start.begin()) - 1;
  };
  const auto rank_of = [&](int t_rank, int replica, int stage) { return t_rank + t.tp * (replica + t.dp * stage); };
  // Replicas whose stages lie on the same groups form one class.
  std::map<std::vector<int>, std::vector<int>> replicas_by_groups;
  std::vector<std::vector<int>> order;
  for (int r = 0; r < t.dp; ++r) {
    std::vector<int> groups;
    for (int k = 0; k < t.pp; ++k) {
      const int g = group_of(rank_of(0, r, k));
      if (group_of(rank_of(t.tp - 1, r, k)) != g) {
        result.unsupported = "a tensor-parallel group spans two device groups";
        return result;
      }
      groups.push_back(g);
    }
    if (!replicas_by_groups.count(groups)) order.push_back(groups);
    replicas_by_groups[groups].push_back(r);
  }
  std::vector<int> owner(cluster.nodes.size(), -1);
  for (size_t c = 0; c < order.size(); ++c) {
    const std::vector<int>& groups = order[c];
    const std::vector<int>& replicas = replicas_by_groups[groups];
    ClassLayout layout;
    layout.replicas = static_cast<int>(replicas.size());
    layout.stage_major = true;
    for (int g : groups) {
      if (!layout.segments.empty() && layout.segments.back().group == g) {
        ++layout.segments.back().stages;
        continue;
      }
      if (owner[g] != -1 && owner[g] != static_cast<int>(c)) {
        result.unsupported = "one device group serves two pipeline classes (HeteroAuto's layouts never do)";
        return result;
      }
      owner[g] = static_cast<int>(c);
      layout.segments.push_back({g, t.tp, 1});
    }
    // The run's devices must be where a stage-major layout of the class puts them.
    int stage = 0;
    for (size_t si = 0; si < layout.segments.size(); ++si)
      for (int k = 0; k < layout.segments[si].stages; ++k, ++stage)
        for (size_t i = 0; i < replicas.size(); ++i)
          if (rank_of(0, replicas[i], stage) - group_start[layout.segments[si].group] !=
              Evaluator::first_device(layout, si, static_cast<int64_t>(i), k)) {
            result.unsupported = "its devices are not dealt out stage by stage within their groups";
            return result;
          }
    PartitionedClass pc{layout, evaluator.stage_specs(layout)};
    for (int k = 0; k < t.pp; ++k) pc.stages[static_cast<size_t>(k)].layers = t.layers[static_cast<size_t>(k)];
    result.classes.push_back(std::move(pc));
    result.split.push_back({static_cast<int>(model.global_batch / (t.micro_batch * t.dp)), 0});
  }
  return result;
}

// A trial that names each replica's nodes: every replica its own class (no two share a node), each
// stage on its node's group.
Configuration configure_named(const Evaluator& evaluator, const Model& model, const Trial& t) {
  const Cluster& cluster = evaluator.cluster();
  Configuration result;
  for (const std::vector<std::string>& nodes : t.replicas) {
    ClassLayout layout;
    layout.replicas = 1;
    layout.stage_major = true;
    for (const std::string& node : nodes) {
      const auto g = std::find_if(cluster.nodes.begin(), cluster.nodes.end(),
                                  [&](const NodeGroup& group) { return group.name == node; });
      layout.segments.push_back({static_cast<int>(g - cluster.nodes.begin()), t.tp, 1});
    }
    PartitionedClass pc{layout, evaluator.stage_specs(layout)};
    for (int k = 0; k < t.pp; ++k) pc.stages[static_cast<size_t>(k)].layers = t.layers[static_cast<size_t>(k)];
    result.classes.push_back(std::move(pc));
    result.split.push_back({static_cast<int>(model.global_batch / (t.micro_batch * t.dp)), 0});
  }
  return result;
}

// The nodes a trial names, each one group of `tp` devices (the stage's share of it), in the order
// they first serve a stage; or why not.
std::string keep_named_nodes(Cluster& cluster, const Trial& t) {
  if (static_cast<int>(t.replicas.size()) != t.dp)
    return "names the nodes of " + std::to_string(t.replicas.size()) + " replicas, not dp";
  std::vector<NodeGroup> used;
  for (int k = 0; k < t.pp; ++k)
    for (const std::vector<std::string>& nodes : t.replicas) {
      if (static_cast<int>(nodes.size()) != t.pp) return "a replica's nodes are not one per stage";
      const std::string& name = nodes[static_cast<size_t>(k)];
      if (std::any_of(used.begin(), used.end(), [&](const NodeGroup& g) { return g.name == name; }))
        return "node '" + name + "' serves two stages";
      const auto g = std::find_if(cluster.nodes.begin(), cluster.nodes.end(),
                                  [&](const NodeGroup& group) { return group.name == name; });
      if (g == cluster.nodes.end() || g->count != 1) return "'" + name + "' is not a node of the cluster";
      if (g->devices_per_node < t.tp) return "node '" + name + "' has fewer than tp devices";
      used.push_back(*g);
      used.back().devices_per_node = t.tp;
    }
  cluster.nodes = used;
  return "";
}

std::string describe(const Trial& t) {
  char text[96];
  std::snprintf(text, sizeof text, "mbs %2d tp %d dp %2d pp %2d", t.micro_batch, t.tp, t.dp, t.pp);
  return text;
}

Trial trial_of(const json& j) {
  Trial t;
  t.index = j.at("trial");
  t.micro_batch = j.at("micro_batch");
  t.tp = j.at("tp");
  t.dp = j.at("dp");
  t.pp = j.at("pp");
  t.layers = j.at("layers").get<std::vector<int>>();
  if (!j.at("measured_s").is_null()) t.measured_s = j.at("measured_s").get<double>();
  if (j.contains("amp_predicted_s")) t.published_prediction_s = j.at("amp_predicted_s").get<double>();
  if (j.contains("own_model_s")) t.published_prediction_s = j.at("own_model_s").get<double>();
  if (j.contains("global_batch")) t.global_batch = j.at("global_batch").get<int64_t>();
  if (j.contains("nodes")) t.nodes = j.at("nodes").get<int>();
  if (j.contains("replicas")) t.replicas = j.at("replicas").get<std::vector<std::vector<std::string>>>();
  return t;
}

// A case's trial under HeteroAuto's model of `cluster`: its predicted step time, or why none.
struct Prediction {
  double step_s = 0;
  std::string unsupported;
};

Prediction predict(const json& c, Cluster cluster, const Trial& t) {
  Model model = parse_model(c.at("model"));
  if (t.global_batch) model.global_batch = *t.global_batch;
  if (t.nodes) {
    if (cluster.nodes.size() != 1) return {0, "a trial's node count needs a cluster of one node group"};
    cluster.nodes.front().count = *t.nodes;
  }
  if (!t.replicas.empty())
    if (std::string why = keep_named_nodes(cluster, t); !why.empty()) return {0, why};
  // "groups": "per node": every node its own device group, so that the replicas on one node form a
  // pipeline class of their own (a run may put one stage's replicas on nodes whose next stages lie
  // on different device types: merged, one group would serve two classes, which HeteroAuto's layouts
  // never do).
  CanonicalCluster canonical;
  if (c.value("groups", "") == "per node") {
    canonical.cluster = cluster;
    canonical.cluster.nodes.clear();
    for (const NodeGroup& g : cluster.nodes)
      for (int i = 0; i < g.count; ++i) {
        NodeGroup node = g;
        node.count = 1;
        if (g.count > 1) node.name += "#" + std::to_string(i);
        canonical.cluster.nodes.push_back(node);
        canonical.members.push_back({{node.name, 1}});
      }
  } else {
    canonical = canonicalize(cluster);
  }
  const json& g = c.at("gradients");
  // "runtime": "deepspeed": its pipeline engine's sends block and are cut over tensor-parallel ranks.
  const PipelineRuntime runtime =
      c.value("runtime", "") == "deepspeed" ? PipelineRuntime::deepspeed : PipelineRuntime::heteropp;
  const Evaluator evaluator(canonical, model, Schedule::one_f_one_b,
                            {.comm_bytes = g.at("comm_dtype") == "f32" ? 4 : 2, .overlap = g.at("overlap").get<bool>()},
                            runtime);
  const Configuration config =
      t.replicas.empty() ? configure(evaluator, model, t) : configure_named(evaluator, model, t);
  if (!config.unsupported.empty()) return {0, config.unsupported};
  return {evaluator.build_plan(config.classes, config.split, t.micro_batch).prediction.step_time_s, ""};
}

// The NICs of `kind` all achieving `efficiency`.
Cluster with_nic_efficiency(Cluster cluster, NicKind kind, double efficiency) {
  for (NicType& nic : cluster.nics)
    if (nic.kind == kind) nic.efficiency = efficiency;
  return cluster;
}

// A NIC kind's efficiency fitted so that a homogeneous trial is predicted as measured (bisection:
// the prediction falls as the efficiency rises).
double fit_nic_efficiency(const json& c, const Cluster& cluster, NicKind kind, const Trial& t) {
  const auto at = [&](double e) { return predict(c, with_nic_efficiency(cluster, kind, e), t).step_s; };
  double low = 0.01, high = 1;
  if (at(high) > *t.measured_s) return high;
  if (at(low) < *t.measured_s) return low;
  for (int i = 0; i < 40; ++i) {
    const double middle = (low + high) / 2;
    (at(middle) > *t.measured_s ? low : high) = middle;
  }
  return (low + high) / 2;
}

// The cluster with `type`'s measured profiles given a fixed share (MeasuredProfile::fixed_share).
Cluster with_fixed_share(Cluster cluster, const std::string& type, double share) {
  for (DeviceType& t : cluster.device_types)
    if (t.name == type)
      for (auto& [model, profile] : t.measured) profile.fixed_share = share;
  return cluster;
}

// A device type's fixed share fitted to homogeneous trials: the share in [0, 0.9] whose predictions
// have the least sum of squared log errors over them (as calibrate_cluster fits one to a type's
// calibrated_from runs; the trials here run as published, not evenly split).
double fit_fixed_share(const json& c, const Cluster& cluster, const std::string& type,
                       const std::vector<Trial>& trials) {
  return minimise_on_grid(
      [&](double share) {
        const Cluster shared = with_fixed_share(cluster, type, share);
        double sum = 0;
        for (const Trial& t : trials) {
          const Prediction p = predict(c, shared, t);
          if (!p.unsupported.empty())
            throw std::runtime_error("trial " + std::to_string(t.index) + " cannot be predicted: " + p.unsupported);
          sum += std::pow(std::log(p.step_s / *t.measured_s), 2);
        }
        return sum;
      },
      0, 0.9);
}

struct CaseResult {
  std::string name, kind;
  int trials = 0, predicted = 0, within_20 = 0;
  double spearman_h2 = 0, spearman_published = 0, mean_abs_error = 0, published_mean_abs_error = 0;
  json calibration = json::array();  // what was fitted for the case, for programs
  json rows = json::array();         // one per trial, as the table prints it

  json to_json() const {
    return {{"case", name},
            {"kind", kind},
            {"calibration", calibration},
            {"trials", rows},
            {"summary",
             {{"trials", trials},
              {"predicted", predicted},
              {"spearman", spearman_h2},
              {"mean_abs_error", mean_abs_error},
              {"within_20_percent", within_20},
              {"publication_spearman", spearman_published},
              {"publication_mean_abs_error", published_mean_abs_error}}}};
  }
};

// A trial's row for programs: its configuration and what was measured; the caller adds the rest.
json row_of(const Trial& t) {
  return {{"trial", t.index},
          {"micro_batch", t.micro_batch},
          {"tp", t.tp},
          {"dp", t.dp},
          {"pp", t.pp},
          {"layers", t.layers},
          {"measured_s", t.measured_s ? json(*t.measured_s) : json(nullptr)}};
}

// NIC efficiencies and profiles' fixed shares fitted on homogeneous cases, by case name, for the
// cases calibrated on them.
std::map<std::string, std::pair<NicKind, double>> fitted_nics;
std::map<std::string, std::map<std::string, double>> fitted_shares;  // case -> device type -> share

CaseResult run_case(const fs::path& file, bool verbose) {
  std::ifstream in(file);
  const json c = json::parse(in);
  CaseResult out{c.at("name"), c.at("kind")};
  std::vector<CalibrationFit> fits;
  Cluster cluster = calibrate_cluster(parse_cluster(c.at("cluster")), &fits);
  std::cout << "\n"
            << out.name << " (" << out.kind << ", " << c.at("status").get<std::string>()
            << "): " << c.at("sources").at("cluster").get<std::string>() << "\n";
  for (const CalibrationFit& fit : fits) out.calibration.push_back(to_json(fit));
  for (const CalibrationFit& fit : fits)
    std::cout << "  calibrated " << fit.device_type << ": "
              << (fit.model.empty()
                      ? "efficiency " + std::to_string(fit.efficiency)
                      : "fixed share " + std::to_string(fit.fixed_share) + " of its " + fit.model + " profile")
              << " (" << fit.source << ")\n";
  // "nic_calibration": {"kind", "trial"} fits the kind's efficiency on one of this (homogeneous)
  // case's trials; {"kind", "case"} takes what a homogeneous case fitted. Trials fitted on are
  // predicted as measured (or nearly) by construction: they leave the comparison.
  std::map<int, std::string> fitted_trials;  // trial -> which calibration used it
  std::optional<int> fitted_trial;
  if (c.contains("nic_calibration")) {
    const json& k = c.at("nic_calibration");
    const NicKind kind = k.at("kind") == "ethernet" ? NicKind::ethernet
                         : k.at("kind") == "roce"   ? NicKind::roce
                                                    : NicKind::infiniband;
    double efficiency = 0;
    if (k.contains("trial")) {
      if (out.kind != "homogeneous") throw std::runtime_error(out.name + ": only a homogeneous case fits a NIC");
      fitted_trial = k.at("trial").get<int>();
      for (const json& j : c.at("trials"))
        if (j.at("trial") == *fitted_trial) efficiency = fit_nic_efficiency(c, cluster, kind, trial_of(j));
      fitted_nics[out.name] = {kind, efficiency};
      out.calibration.push_back({{"nic_kind", to_string(kind)},
                                 {"fitted", "efficiency"},
                                 {"value", efficiency},
                                 {"trials", {*fitted_trial}}});
      std::printf("  calibrated %s NICs: efficiency %.3f, fitted on trial %d\n", to_string(kind).c_str(), efficiency,
                  *fitted_trial);
    } else {
      const std::string from = k.at("case");
      if (!fitted_nics.count(from))
        throw std::runtime_error(out.name + ": no homogeneous case '" + from + "' came first");
      efficiency = fitted_nics[from].second;
      out.calibration.push_back(
          {{"nic_kind", to_string(kind)}, {"fitted", "efficiency"}, {"value", efficiency}, {"case", from}});
      std::printf("  %s NICs: efficiency %.3f, as fitted on %s\n", to_string(kind).c_str(), efficiency, from.c_str());
    }
    cluster = with_nic_efficiency(cluster, kind, efficiency);
  }
  if (fitted_trial) fitted_trials[*fitted_trial] = "the NIC calibration's trial";
  // "profile_calibration": {"device_type", "fit_on": [trials]} fits the type's fixed share on those
  // trials of this (homogeneous) case; {"device_type", "case"} takes what a homogeneous case fitted.
  if (c.contains("profile_calibration")) {
    const json& k = c.at("profile_calibration");
    const std::string type = k.at("device_type");
    double share = 0;
    if (k.contains("fit_on")) {
      if (out.kind != "homogeneous") throw std::runtime_error(out.name + ": only a homogeneous case fits a profile");
      std::vector<Trial> on;
      for (int index : k.at("fit_on").get<std::vector<int>>()) {
        const auto j = std::find_if(c.at("trials").begin(), c.at("trials").end(),
                                    [&](const json& trial) { return trial.at("trial") == index; });
        if (j == c.at("trials").end() || j->at("measured_s").is_null() || fitted_trials.count(index))
          throw std::runtime_error(out.name + ": profile_calibration.fit_on: trial " + std::to_string(index) +
                                   " is not a measured trial that no other calibration uses");
        on.push_back(trial_of(*j));
        fitted_trials[index] = "fitted for the fixed share";
      }
      if (on.empty()) throw std::runtime_error(out.name + ": profile_calibration.fit_on names no trial");
      share = fit_fixed_share(c, cluster, type, on);
      fitted_shares[out.name][type] = share;
      json indices = json::array();
      for (const Trial& t : on) indices.push_back(t.index);
      out.calibration.push_back(
          {{"device_type", type}, {"fitted", "fixed_share"}, {"value", share}, {"trials", indices}});
      std::printf("  calibrated %s: fixed share %.3f, fitted on %zu trials (marked below)\n", type.c_str(), share,
                  on.size());
    } else {
      const std::string from = k.at("case");
      if (!fitted_shares.count(from) || !fitted_shares[from].count(type))
        throw std::runtime_error(out.name + ": no homogeneous case '" + from + "' fitted " + type + " first");
      share = fitted_shares[from][type];
      out.calibration.push_back({{"device_type", type}, {"fitted", "fixed_share"}, {"value", share}, {"case", from}});
      std::printf("  %s: fixed share %.3f, as fitted on %s\n", type.c_str(), share, from.c_str());
    }
    cluster = with_fixed_share(cluster, type, share);
  }
  std::vector<double> measured, predicted, published;
  double error_sum = 0, published_error_sum = 0;
  if (verbose)
    std::printf("  %-4s %-26s %-20s %10s %10s %8s %10s %8s\n", "#", "configuration", "layers per stage", "measured",
                "HeteroAuto", "error", "published", "error");
  for (const json& j : c.at("trials")) {
    const Trial t = trial_of(j);
    ++out.trials;
    json row = row_of(t);
    if (!t.measured_s) {  // failed in the publication: nothing to compare
      out.rows.push_back(row);
      continue;
    }
    std::string layers;
    for (int l : t.layers) layers += (layers.empty() ? "" : "/") + std::to_string(l);
    const Prediction p = predict(c, cluster, t);
    if (!p.unsupported.empty()) {
      row["not_predicted"] = p.unsupported;
      out.rows.push_back(row);
      if (verbose)
        std::printf("  %-4d %-26s %-20s %9.2fs  not predicted: %s\n", t.index, describe(t).c_str(), layers.c_str(),
                    *t.measured_s, p.unsupported.c_str());
      continue;
    }
    row["predicted_s"] = p.step_s;
    if (const auto fitted = fitted_trials.find(t.index); fitted != fitted_trials.end()) {  // not evidence
      row["left_out"] = fitted->second;
      out.rows.push_back(row);
      if (verbose)
        std::printf("  %-4d %-26s %-20s %9.2fs %9.3fs  (%s)\n", t.index, describe(t).c_str(), layers.c_str(),
                    *t.measured_s, p.step_s, fitted->second.c_str());
      continue;
    }
    const double step = p.step_s;
    const double error = (step - *t.measured_s) / *t.measured_s;
    ++out.predicted;
    measured.push_back(*t.measured_s);
    predicted.push_back(step);
    error_sum += std::abs(error);
    if (std::abs(error) <= 0.2) ++out.within_20;
    double published_error = 0;
    if (t.published_prediction_s) {
      published.push_back(*t.published_prediction_s);
      published_error = (*t.published_prediction_s - *t.measured_s) / *t.measured_s;
      published_error_sum += std::abs(published_error);
    }
    row["error"] = error;
    row["published_s"] = t.published_prediction_s ? json(*t.published_prediction_s) : json(nullptr);
    out.rows.push_back(row);
    if (verbose)
      std::printf("  %-4d %-26s %-20s %9.2fs %9.3fs %+7.1f%% %9.3fs %+7.1f%%\n", t.index, describe(t).c_str(),
                  layers.c_str(), *t.measured_s, step, error * 100, t.published_prediction_s.value_or(0),
                  published_error * 100);
  }
  if (out.predicted > 1) {
    out.spearman_h2 = spearman(predicted, measured);
    out.mean_abs_error = error_sum / out.predicted;
  }
  if (published.size() == predicted.size() && out.predicted > 1) {
    out.spearman_published = spearman(published, measured);
    out.published_mean_abs_error = published_error_sum / out.predicted;
  }
  std::printf(
      "  %d trials, %d measured and predicted: Spearman %.3f (the publication's own model: %.3f), mean |error| "
      "%.1f%% (publication: %.1f%%), within 20%%: %d of %d\n",
      out.trials, out.predicted, out.spearman_h2, out.spearman_published, out.mean_abs_error * 100,
      out.published_mean_abs_error * 100, out.within_20, out.predicted);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HeteroAuto's predictions against published measurements"};
  std::string directory, json_path;
  bool quiet = false;
  app.add_option("--cases", directory, "bench/heteroauto/published")->required()->check(CLI::ExistingDirectory);
  app.add_flag("--quiet", quiet, "Only each case's summary");
  app.add_option("--json", json_path, "Also write every case's trials, calibration and summary as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(directory))
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    std::vector<CaseResult> results;
    for (const fs::path& f : files) results.push_back(run_case(f, !quiet));
    std::cout << "\nGoals (calibrated on homogeneous measurements only)\n";
    for (const CaseResult& r : results) {
      std::printf("  %-22s Spearman %.3f (goal >= 0.9: %s)", r.name.c_str(), r.spearman_h2,
                  r.spearman_h2 >= 0.9 ? "met" : "NOT met");
      if (r.kind == "heterogeneous")
        std::printf(", within 20%%: %d of %d (goal: all: %s)", r.within_20, r.predicted,
                    r.within_20 == r.predicted ? "met" : "NOT met");
      std::printf("\n");
    }
    if (!json_path.empty()) {
      json cases = json::array();
      for (const CaseResult& r : results) cases.push_back(r.to_json());
      std::ofstream out(json_path);
      out << json{{"cases", cases}}.dump(1) << "\n";
      if (!out) throw std::runtime_error("cannot write " + json_path);
    }
  } catch (const std::exception& e) {
    std::cerr << "published_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
