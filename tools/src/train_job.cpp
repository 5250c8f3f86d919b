#include "train_job.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "h2/heteroauto/description.hpp"

namespace h2::tools {

namespace {

constexpr const char* kFormat = "h2-train-job";
constexpr int kVersion = 1;

class JobReader {
 public:
  JobReader(const std::string& path) : path_(path), json_(heteroauto::read_json_file(path, "job")) {
    if (!json_.is_object()) fail("the file", "a JSON object");
  }

  template <typename T>
  T get(const char* field, const char* what) const {
    const auto found = json_.find(field);
    if (found == json_.end()) fail(field, what, "is missing");
    try {
      return found->get<T>();
    } catch (const nlohmann::json::exception&) {
      fail(field, what);
    }
  }
  // A whole number in [low, high]: nlohmann would read 2.5 as 2, true as 1 and -1 as 2^64 - 1.
  int64_t integer(const char* field, int64_t low, int64_t high) const {
    const std::string what = "a whole number in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
    const auto found = json_.find(field);
    if (found == json_.end()) fail(field, what.c_str(), "is missing");
    if (!found->is_number_integer() || (found->is_number_unsigned() && found->get<uint64_t>() > uint64_t(INT64_MAX)))
      fail(field, what.c_str());
    const int64_t value = found->get<int64_t>();
    if (value < low || value > high) fail(field, what.c_str());
    return value;
  }
  // Any whole number in [0, 2^64) (a seed).
  uint64_t unsigned_integer(const char* field) const {
    const auto found = json_.find(field);
    if (found == json_.end()) fail(field, "a whole number in [0, 2^64)", "is missing");
    if (!found->is_number_integer() || (!found->is_number_unsigned() && found->get<int64_t>() < 0))
      fail(field, "a whole number in [0, 2^64)");
    return found->get<uint64_t>();
  }
  std::string one_of(const char* field, std::initializer_list<const char*> allowed) const {
    const std::string value = get<std::string>(field, "a string");
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return value == a; })) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(field, ("one of " + list).c_str());
    }
    return value;
  }
  [[noreturn]] void fail(const char* field, const char* what, const char* problem = nullptr) const {
    const std::string where = "job " + path_ + ": ";
    if (problem != nullptr) throw heteroauto::DescriptionError(where + "\"" + field + "\" " + problem);
    const auto found = json_.is_object() ? json_.find(field) : json_.end();
    throw heteroauto::DescriptionError(
        where +
        (found == json_.end() ? std::string(field)
                              : "\"" + std::string(field) + "\" is " + heteroauto::brief_json(*found) + ";") +
        " it must be " + what);
  }

 private:
  std::string path_;
  nlohmann::json json_;
};

}  // namespace

nlohmann::json train_job_json(const TrainCommandOptions& o, const PluginOptionsByName& plugin_options) {
  nlohmann::json plugins = nlohmann::json::object();
  for (const auto& [plugin, options] : plugin_options)
    for (const auto& [key, value] : options) plugins[plugin][key] = value;
  return {{"format", kFormat},
          {"version", kVersion},
          {"cluster", o.cluster},
          {"model", o.model},
          {"plan", o.plan},
          {"steps", o.steps},
          {"out", o.out},
          {"resume", o.resume},
          {"lr", o.lr},
          {"min_lr", o.min_lr},
          {"warmup", o.warmup},
          {"weight_decay", o.weight_decay},
          {"clip", o.clip},
          {"seed", o.seed},
          {"schedule", o.schedule},
          {"loss_scale", o.loss_scale},
          {"initial_loss_scale", o.initial_loss_scale},
          {"loss_scale_window", o.loss_scale_window},
          {"data", o.data},
          {"checkpoint_every", o.checkpoint_every},
          {"keep_checkpoints", o.keep_checkpoints},
          {"overlap_grad_reduce", o.overlap_grad_reduce},
          {"grad_bucket_bytes", o.grad_bucket_bytes},
          {"grad_comm_dtype", o.grad_comm_dtype},
          {"distributed_optimizer", o.distributed_optimizer},
          {"plugin_options", plugins}};
}

TrainCommandOptions read_train_job(const std::string& path) {
  const JobReader job(path);
  if (job.get<std::string>("format", "\"h2-train-job\"") != kFormat) job.fail("format", "\"h2-train-job\"");
  if (job.integer("version", 0, INT32_MAX) != kVersion) job.fail("version", "1 (this h2 writes and reads version 1)");
  TrainCommandOptions o;
  o.worker = true;
  o.cluster = job.get<std::string>("cluster", "a path");
  o.model = job.get<std::string>("model", "a path");
  o.plan = job.get<std::string>("plan", "a path");
  o.steps = job.integer("steps", 1, INT64_MAX);
  o.out = job.get<std::string>("out", "a path");
  o.resume = job.get<std::string>("resume", "a path or \"\"");
  o.lr = job.get<double>("lr", "a number");
  o.min_lr = job.get<double>("min_lr", "a number");
  o.warmup = job.integer("warmup", 0, INT64_MAX);
  o.weight_decay = job.get<double>("weight_decay", "a number");
  o.clip = job.get<double>("clip", "a number");
  o.seed = job.unsigned_integer("seed");
  o.schedule = job.one_of("schedule", {"1f1b", "gpipe"});
  o.loss_scale = job.one_of("loss_scale", {"auto", "dynamic", "none"});
  o.initial_loss_scale = job.get<double>("initial_loss_scale", "a number");
  o.loss_scale_window = job.integer("loss_scale_window", 1, INT64_MAX);
  o.data = job.get<std::vector<std::string>>("data", "an array of paths");
  o.checkpoint_every = job.integer("checkpoint_every", 0, INT64_MAX);
  o.keep_checkpoints = static_cast<int>(job.integer("keep_checkpoints", 1, 1000));
  o.overlap_grad_reduce = job.one_of("overlap_grad_reduce", {"on", "off"});
  o.grad_bucket_bytes = static_cast<uint64_t>(job.integer("grad_bucket_bytes", 1, int64_t{1} << 40));
  o.grad_comm_dtype = job.one_of("grad_comm_dtype", {"f32", "bf16", "f16"});
  o.distributed_optimizer = job.get<bool>("distributed_optimizer", "true or false");
  using Plugins = std::map<std::string, std::map<std::string, std::string>>;
  for (const auto& [plugin, options] : job.get<Plugins>("plugin_options", "an object of objects of strings"))
    for (const auto& [key, value] : options) o.plugin_options.push_back(plugin + ":" + key + "=" + value);
  return o;
}

}  // namespace h2::tools
