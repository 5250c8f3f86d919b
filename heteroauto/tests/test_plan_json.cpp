// The plan file round-trips, and a plan that breaks an invariant is refused with the field named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fixtures.hpp"
#include "h2/heteroauto/search.hpp"

namespace h2::heteroauto {
namespace {

using testing::HasSubstr;

class PlanJson : public testing::Test {
 protected:
  void SetUp() override {
    const SearchResult result = search_plans(cluster, parse_model(test::model_7b()), {.top = 1});
    ASSERT_FALSE(result.plans.empty()) << result.infeasible;
    plan = to_json(result.plans[0]);
  }
  std::string error_of(const nlohmann::json& j) {
    try {
      check_plan_invariants(plan_from_json(j), cluster);
    } catch (const DescriptionError& e) {
      return e.what();
    }
    return "";
  }
  Cluster cluster = parse_cluster(test::two_type_cluster());
  nlohmann::json plan;
};

TEST_F(PlanJson, RoundTrips) {
  EXPECT_EQ(to_json(plan_from_json(plan)).dump(), plan.dump());
  EXPECT_EQ(error_of(plan), "");
  EXPECT_EQ(plan["format"], "h2-plan");
  EXPECT_GT(plan["prediction"]["tokens_per_s"].get<double>(), 0);
}

TEST_F(PlanJson, RefusesADeviceUsedTwice) {
  nlohmann::json bad = plan;
  auto& replicas = bad["pipelines"][0]["replicas"];
  auto& devices = replicas[0]["devices"];
  if (devices.size() > 1)
    devices[1][0] = devices[0][0];
  else if (replicas.size() > 1)
    replicas[1]["devices"][0][0] = devices[0][0];
  else
    GTEST_SKIP() << "the plan has a single device";
  EXPECT_THAT(error_of(bad), HasSubstr("used twice"));
}

TEST_F(PlanJson, RefusesLayersThatDoNotCoverTheModel) {
  nlohmann::json bad = plan;
  bad["pipelines"][0]["stages"].back()["layers"] = bad["pipelines"][0]["stages"].back()["layers"].get<int>() + 1;
  EXPECT_THAT(error_of(bad), HasSubstr("layers; the model has 32"));
}

TEST_F(PlanJson, RefusesMicroBatchesThatDoNotCoverTheGlobalBatch) {
  nlohmann::json bad = plan;
  bad["pipelines"][0]["replicas"][0]["micro_batches"] =
      bad["pipelines"][0]["replicas"][0]["micro_batches"].get<int>() + 1;
  EXPECT_THAT(error_of(bad), HasSubstr("the global batch is 512"));
}

TEST_F(PlanJson, NamesTheBadField) {
  nlohmann::json bad = plan;
  bad["pipelines"][0]["stages"][0]["tp"] = 0;
  EXPECT_THAT(error_of(bad), HasSubstr("pipelines[0].stages[0].tp"));
  bad = plan;
  bad["format"] = "something-else";
  EXPECT_THAT(error_of(bad), HasSubstr("format"));
}

}  // namespace
}  // namespace h2::heteroauto
