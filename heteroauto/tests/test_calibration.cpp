// Calibration: a device type's efficiency fitted to a homogeneous run, then used where the type
// appears; runs no efficiency can meet, and descriptions that say both, are refused by name.
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
  const DeviceType& fast = described.device_type("fast");
  ASSERT_TRUE(fast.calibrated_from.has_value());
  // A step measured as HeteroAuto predicts it at efficiency 0.37 gives back 0.37.
  const double at_037 = predict_calibration_run(described, fast, 0.37);
  EXPECT_GT(predict_calibration_run(described, fast, 0.2), at_037);
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
