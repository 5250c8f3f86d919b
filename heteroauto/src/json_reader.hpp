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
  // Numbers are finite and in [low, high], integers whole and in [low, high]: every field has a range
  // a real cluster or model keeps inside (an int64 2^32 + 1 used to become the int 1, a peak of 1e-300
  // a 47-digit step time).
  double required_number(const std::string& key, double low, double high);
  double number(const std::string& key, double fallback, double low, double high);
  int64_t required_integer(const std::string& key, int64_t low, int64_t high);
  int64_t optional_integer(const std::string& key, int64_t fallback, int64_t low, int64_t high);
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
