#include "h2/heteropp/timeline.hpp"

namespace h2::heteropp {

namespace {

double microseconds(Timeline::Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(t.time_since_epoch()).count();
}

}  // namespace

void Timeline::add(const std::string& name, const char* category, Clock::time_point start, Clock::time_point end,
                   nlohmann::json args, int thread) {
  nlohmann::json event = {{"name", name},
                          {"cat", category},
                          {"ph", "X"},
                          {"pid", rank_},
                          {"tid", thread},
                          {"ts", microseconds(start)},
                          {"dur", microseconds(end) - microseconds(start)}};
  if (!args.is_null()) event["args"] = std::move(args);
  std::lock_guard lock(mutex_);
  events_.push_back(std::move(event));
}

nlohmann::json Timeline::events() const {
  nlohmann::json all = nlohmann::json::array();
  all.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"name", label_}}}});
  all.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", rank_}, {"args", {{"sort_index", rank_}}}});
  all.push_back({{"name", "thread_name"},
                 {"ph", "M"},
                 {"pid", rank_},
                 {"tid", kStageThread},
                 {"args", {{"name", "passes and pipeline"}}}});
  all.push_back({{"name", "thread_name"},
                 {"ph", "M"},
                 {"pid", rank_},
                 {"tid", kGradientThread},
                 {"args", {{"name", "gradient sums"}}}});
  std::lock_guard lock(mutex_);
  for (const nlohmann::json& e : events_) all.push_back(e);
  return all;
}

nlohmann::json Timeline::merge(const std::vector<nlohmann::json>& ranks) {
  nlohmann::json events = nlohmann::json::array();
  for (const nlohmann::json& rank : ranks)
    for (const nlohmann::json& e : rank) events.push_back(e);
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace h2::heteropp
