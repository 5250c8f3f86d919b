#include "json_reader.hpp"

#include <cmath>
#include <cstdint>

namespace h2::heteroauto {

JsonReader::JsonReader(const nlohmann::json& object, std::string path) : object_(object), path_(std::move(path)) {
  if (!object_.is_object())
    throw DescriptionError((path_.empty() ? std::string("the description") : path_) + ": must be a JSON object, not " +
                           object_.type_name());
}

std::string JsonReader::path_of(const std::string& key) const {
  return path_.empty() ? key : path_ + "." + key;
}

void JsonReader::fail(const std::string& key, const std::string& message) const {
  throw DescriptionError(path_of(key) + ": " + message);
}

const nlohmann::json* JsonReader::optional(const std::string& key) {
  seen_.insert(key);
  auto it = object_.find(key);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

const nlohmann::json& JsonReader::required(const std::string& key) {
  const nlohmann::json* value = optional(key);
  if (value == nullptr) fail(key, "is required");
  return *value;
}

std::string JsonReader::string(const std::string& key) {
  const nlohmann::json& v = required(key);
  if (!v.is_string() || v.get<std::string>().empty()) fail(key, "must be a non-empty string");
  return v.get<std::string>();
}

std::string JsonReader::string(const std::string& key, const std::string& fallback) {
  return optional(key) ? string(key) : fallback;
}

namespace {
double as_number(const JsonReader& r, const std::string& key, const nlohmann::json& v) {
  if (!v.is_number()) r.fail(key, std::string("must be a number, not ") + v.type_name());
  const double d = v.get<double>();
  if (!std::isfinite(d)) r.fail(key, "must be finite");
  return d;
}
int64_t as_integer(const JsonReader& r, const std::string& key, const nlohmann::json& v) {
  if (!v.is_number_integer()) r.fail(key, "must be an integer, not " + brief_json(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    r.fail(key, "is too large (got " + v.dump() + ")");
  return v.get<int64_t>();
}
std::string range_text(double low, double high) {
  return "[" + nlohmann::json(low).dump() + ", " + nlohmann::json(high).dump() + "]";
}
}  // namespace

double JsonReader::required_number(const std::string& key, double low, double high) {
  const double d = as_number(*this, key, required(key));
  if (d < low || d > high) fail(key, "must be in " + range_text(low, high) + " (got " + nlohmann::json(d).dump() + ")");
  return d;
}

double JsonReader::number(const std::string& key, double fallback, double low, double high) {
  return optional(key) ? required_number(key, low, high) : fallback;
}

int64_t JsonReader::required_integer(const std::string& key, int64_t low, int64_t high) {
  const int64_t i = as_integer(*this, key, required(key));
  if (i < low || i > high)
    fail(key, "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "] (got " + std::to_string(i) + ")");
  return i;
}

int64_t JsonReader::optional_integer(const std::string& key, int64_t fallback, int64_t low, int64_t high) {
  return optional(key) ? required_integer(key, low, high) : fallback;
}

void JsonReader::array(const std::string& key, bool is_required, bool allow_empty,
                       const std::function<void(const nlohmann::json&, const std::string&)>& each) {
  const nlohmann::json* v = is_required ? &required(key) : optional(key);
  if (v == nullptr) return;
  if (!v->is_array()) fail(key, std::string("must be an array, not ") + v->type_name());
  if (v->empty() && !allow_empty) fail(key, "must not be empty");
  for (size_t i = 0; i < v->size(); ++i) each((*v)[i], path_of(key) + "[" + std::to_string(i) + "]");
}

void JsonReader::reject_unknown() const {
  for (const auto& [key, value] : object_.items())
    if (!seen_.count(key)) fail(key, "is not a known field");
}

}  // namespace h2::heteroauto
