// Reading one JSON object of a description: typed fields with their JSON path in every error, range
// checks, and unknown fields rejected (a misspelt "memroy_gib" must not silently mean the default).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "h2/heteroauto/description.hpp"

namespace h2::heteroauto {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& object, std::string path);

  [[noreturn]] void fail(const std::string& key, const std::string& message) const;
  std::string path_of(const std::string& key) const;

  const nlohmann::json& required(const std::string& key);
  const nlohmann::json* optional(const std::string& key);

  std::string string(const std::string& key);
  std::string string(const std::string& key, const std::string& fallback);
  double positive(const std::string& key);                                          // > 0
  double number(const std::string& key, double fallback, double low, double high);  // in [low, high]
  int64_t positive_integer(const std::string& key);
  int64_t integer(const std::string& key, int64_t fallback, int64_t low);
  // Calls `each(element, path)` for every element of the (non-empty unless allow_empty) array.
  void array(const std::string& key, bool required, bool allow_empty,
             const std::function<void(const nlohmann::json&, const std::string&)>& each);

  // Fails on any field that was never asked for.
  void reject_unknown() const;

 private:
  const nlohmann::json& object_;
  std::string path_;
  std::set<std::string> seen_;
};

}  // namespace h2::heteroauto
