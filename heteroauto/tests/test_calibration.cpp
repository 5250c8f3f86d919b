// Calibration: a device type's efficiency, or its measured profile's fixed share, fitted to
// homogeneous runs, then used where the type appears; runs nothing can meet, runs that cannot show
// the share, and descriptions that say both, are refused by name.
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "h2/heteroauto/calibration.hpp"
#include "h2/heteroauto/search.hpp"

namespace h2::heteroauto {
namespace {

using nlohmann::json;

// "fast" calibrated on 2 nodes of 8 running the small model at tp 2, pp 2 (4 replicas).
json calibrated_cluster(double step_time_s) {
  json c = test::two_type_cluster();
  c["device_types"][0].erase("efficiency");
  c["device_types"][0]["calibrated_from"] = {{"source", "a homogeneous run"},
                                             {"model", test::small_model()},
                                             {"nodes",
                                              {{"count", 2},
                                               {"devices_per_node", 8},
                                               {"intra_node_bandwidth_gbps", 2400},
                                               {"nic", "ib"},
                                               {"nics_per_node", 8}}},
                                             {"layout", {{"tp", 2}, {"pp", 2}, {"micro_batch", 1}}},
                                             {"step_time_s", step_time_s}};
  return c;
}

TEST(Calibration, FitsTheEfficiencyThatPredictsTheMeasuredStep) {
  const Cluster described = parse_cluster(calibrated_cluster(1));
  DeviceType fast = described.device_type("fast");
  ASSERT_EQ(fast.calibrated_from.size(), 1u);
  const Calibration run = fast.calibrated_from.front();
  // A step measured as HeteroAuto predicts it at efficiency 0.37 gives back 0.37.
  fast.efficiency = 0.37;
  const double at_037 = predict_calibration_run(described, fast, run);
  fast.efficiency = 0.2;
  EXPECT_GT(predict_calibration_run(described, fast, run), at_037);
  const Cluster cluster = parse_cluster(calibrated_cluster(at_037));
  std::vector<CalibrationFit> fits;
  const Cluster calibrated = calibrate_cluster(cluster, &fits);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].device_type, "fast");
  EXPECT_NEAR(fits[0].efficiency, 0.37, 1e-6);
  EXPECT_NEAR(calibrated.device_type("fast").efficiency, 0.37, 1e-6);
  EXPECT_DOUBLE_EQ(calibrated.device_type("slow").efficiency, 0.5);  // not calibrated: as described
  // The search plans with it and says so.
  const SearchResult result = search_plans(cluster, parse_model(test::small_model()));
  ASSERT_FALSE(result.plans.empty());
  EXPECT_NE(result.explanation.front().find("calibrated fast: efficiency 0.370"), std::string::npos)
      << result.explanation.front();
  EXPECT_EQ(
      result.plans.front().prediction.cost_basis.count("fast") == 0 ||
          result.plans.front().prediction.cost_basis.at("fast") == "peak x efficiency fitted to a homogeneous run",
      true);
}

// One run of the small model on a node of 8 "fast" devices.
json run_of(int tp, int pp, int micro_batch, double step_time_s) {
  return {{"source", "run tp" + std::to_string(tp) + " pp" + std::to_string(pp) + " mbs" + std::to_string(micro_batch)},
          {"model", test::small_model()},
          {"nodes",
           {{"count", 1},
            {"devices_per_node", 8},
            {"intra_node_bandwidth_gbps", 2400},
            {"nic", "ib"},
            {"nics_per_node", 8}}},
          {"layout", {{"tp", tp}, {"pp", pp}, {"micro_batch", micro_batch}}},
          {"step_time_s", step_time_s}};
}

// Each run's step as HeteroAuto predicts it for `type` as given.
json runs_as_predicted(const json& description, const DeviceType& type, json runs) {
  const Cluster cluster = parse_cluster(description);
  for (json& run : runs) {
    json one = description;
    one["device_types"][0]["calibrated_from"] = run;
    const Calibration parsed = parse_cluster(one).device_type("fast").calibrated_from.front();
    run["step_time_s"] = predict_calibration_run(cluster, type, parsed);
  }
  return runs;
}

// A profile measured at micro-batch 1 and degree 1 cannot show its fixed share; runs at degree 2
// and micro-batch 2 can: steps as predicted with a share of 0.3 give it back, and the efficiency is
// left alone. Several runs fit an efficiency too, by least squares.
TEST(Calibration, FitsAProfilesFixedShareAndAnEfficiencyToSeveralRuns) {
  json c = test::two_type_cluster();
  c["device_types"][0]["measured"]["small"] = {
      {"layer", {{{"micro_batch", 1}, {"forward_ms", 10}, {"backward_ms", 20}}}},
      {"head", {{{"micro_batch", 1}, {"forward_ms", 4}, {"backward_ms", 8}}}}};
  DeviceType truth = parse_cluster(c).device_type("fast");
  truth.measured.at("small").fixed_share = 0.3;
  c["device_types"][0]["calibrated_from"] =
      runs_as_predicted(c, truth, json::array({run_of(2, 2, 2, 1), run_of(1, 2, 2, 1)}));
  std::vector<CalibrationFit> fits;
  const Cluster calibrated = calibrate_cluster(parse_cluster(c), &fits);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].model, "small");
  EXPECT_NEAR(fits[0].fixed_share, 0.3, 1e-3);
  EXPECT_LT(fits[0].rms_log_error, 1e-3);  // the runs are what the share predicts
  EXPECT_NEAR(calibrated.device_type("fast").measured.at("small").fixed_share, 0.3, 1e-3);
  EXPECT_DOUBLE_EQ(calibrated.device_type("fast").efficiency, 0.5);  // given, and kept
  const SearchResult result = search_plans(parse_cluster(c), parse_model(test::small_model()));
  EXPECT_NE(result.explanation.front().find("calibrated fast: fixed share 0.30"), std::string::npos)
      << result.explanation.front();
  EXPECT_NE(result.explanation.front().find("steps of run tp2 pp2 mbs2; run tp1 pp2 mbs2"), std::string::npos)
      << result.explanation.front();
  // Runs no share explains (ten times as slow as predicted) get a fit that says so.
  json slow = c;
  for (json& run : slow["device_types"][0]["calibrated_from"])
    run["step_time_s"] = run["step_time_s"].get<double>() * 10;
  const SearchResult unexplained = search_plans(parse_cluster(slow), parse_model(test::small_model()));
  EXPECT_NE(unexplained.explanation.front().find("the model does not explain them"), std::string::npos)
      << unexplained.explanation.front();

  // Runs that the share does not change (degree 1 at the profile's micro-batch size) are refused.
  c["device_types"][0]["calibrated_from"] = json::array({run_of(1, 1, 1, 1)});
  try {
    calibrate_cluster(parse_cluster(c));
    FAIL() << "a share was fitted to runs it does not change";
  } catch (const DescriptionError& e) {
    EXPECT_NE(std::string(e.what()).find("device type 'fast': calibrated_from: no run of small depends on its "
                                         "profile's fixed share"),
              std::string::npos)
        << e.what();
  }

  // Without a profile, two runs fit the efficiency.
  json plain = test::two_type_cluster();
  plain["device_types"][0].erase("efficiency");
  DeviceType at_037 = parse_cluster(plain).device_type("fast");
  at_037.efficiency = 0.37;
  plain["device_types"][0]["calibrated_from"] =
      runs_as_predicted(plain, at_037, json::array({run_of(2, 2, 1, 1), run_of(1, 2, 2, 1)}));
  fits.clear();
  calibrate_cluster(parse_cluster(plain), &fits);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_TRUE(fits[0].model.empty());
  EXPECT_NEAR(fits[0].efficiency, 0.37, 0.003);
  EXPECT_EQ(fits[0].measured_step_s.size(), 2u);
  // A list names the run at fault.
  plain["device_types"][0]["calibrated_from"][1]["layout"]["tp"] = 3;
  try {
    parse_cluster(plain);
    FAIL() << "a run with tp 3 on 8 devices was accepted";
  } catch (const DescriptionError& e) {
    EXPECT_NE(std::string(e.what()).find("device_types[0].calibrated_from[1].layout.tp"), std::string::npos)
        << e.what();
  }
}

TEST(Calibration, RefusesARunNoEfficiencyMeetsNamingTheType) {
  try {
    calibrate_cluster(parse_cluster(calibrated_cluster(1e-9)));
    FAIL() << "a step faster than the peak allows was fitted";
  } catch (const DescriptionError& e) {
    EXPECT_NE(std::string(e.what()).find("device type 'fast': calibrated_from (a homogeneous run)"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("faster than HeteroAuto predicts at efficiency 1"), std::string::npos);
  }
  EXPECT_THROW(calibrate_cluster(parse_cluster(calibrated_cluster(1e6))), DescriptionError);
}

TEST(Calibration, BadDescriptionsAreNamed) {
  const auto error_of = [](const json& c) {
    try {
      parse_cluster(c);
    } catch (const DescriptionError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  json both = calibrated_cluster(1);
  both["device_types"][0]["efficiency"] = 0.5;
  EXPECT_EQ(error_of(both),
            "device_types[0].calibrated_from: and efficiency both say how fast the type is: give one of them");
  json nic = calibrated_cluster(1);
  nic["device_types"][0]["calibrated_from"]["nodes"]["nic"] = "roce";
  EXPECT_EQ(error_of(nic), "device_types[0].calibrated_from.nodes.nic: 'roce' is not one of nic_types");
  json layout = calibrated_cluster(1);
  layout["device_types"][0]["calibrated_from"]["layout"]["tp"] = 3;
  EXPECT_NE(error_of(layout).find("device_types[0].calibrated_from.layout.tp"), std::string::npos) << error_of(layout);
  json model = calibrated_cluster(1);
  model["device_types"][0]["calibrated_from"]["model"]["layers"] = 0;
  EXPECT_NE(error_of(model).find("device_types[0].calibrated_from.model.layers"), std::string::npos) << error_of(model);
  json unknown = calibrated_cluster(1);
  unknown["device_types"][0]["calibrated_from"]["step_time"] = 1;
  EXPECT_NE(error_of(unknown).find("step_time"), std::string::npos) << error_of(unknown);
}

}  // namespace
}  // namespace h2::heteroauto
