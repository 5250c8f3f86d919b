#include "options.hpp"

#include <cctype>

#include "common.hpp"

namespace h2::cpu_reference {

namespace {

// The keys config.cpp reads; a key added there is added here, or initialize refuses it as unknown.
constexpr H2_OptionInfo kOptions[] = {
    {sizeof(H2_OptionInfo), "devices", "number of simulated devices, 1 to 64 (H2_CPU_REFERENCE_DEVICES)",
     "1, or the length of the memory list"},
    {sizeof(H2_OptionInfo), "memory",
     "capacity per device: one size for all (2GiB) or one per device (4GiB,2GiB,1GiB); units B, KiB, MiB, GiB, "
     "TiB (K, M, G, T alike) and KB, MB, GB, TB as powers of 1000 (H2_CPU_REFERENCE_MEMORY)",
     "4GiB"},
    {sizeof(H2_OptionInfo), "strict",
     "1/true/on/yes: device memory is not readable by host code outside plugin calls (H2_CPU_REFERENCE_STRICT)", "off"},
    {sizeof(H2_OptionInfo), "blocking",
     "1/true/on/yes: every stream call completes before it returns, as CUDA_LAUNCH_BLOCKING=1 "
     "(H2_CPU_REFERENCE_BLOCKING)",
     "off"},
    {sizeof(H2_OptionInfo), "op_dtypes",
     "float dtypes the operators take, a list of f64, f32, f16, bf16; f32,f16,bf16 refuses f64 as accelerator "
     "plugins do (H2_CPU_REFERENCE_OP_DTYPES)",
     "f64,f32,f16,bf16"},
    {sizeof(H2_OptionInfo), "threads",
     "threads each operator computes with, 1 to 256; results are bit-identical for any value "
     "(H2_CPU_REFERENCE_THREADS)",
     "the machine's cores"},
    {sizeof(H2_OptionInfo), "collectives_in_place",
     "size from which the collective library reads and writes the ranks' buffers in place instead of copying "
     "through its shared segment; 0/off: never; alike on every rank (H2_CPU_REFERENCE_COLLECTIVES_IN_PLACE)",
     "64KiB"},
};

}  // namespace

const H2_OptionInfo* option_infos() {
  return kOptions;
}

size_t option_count() {
  return std::size(kOptions);
}

std::string option_variable(const std::string& key) {
  std::string name = "H2_CPU_REFERENCE_";
  for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

SettingLookup settings_from(std::map<std::string, std::string> options, EnvLookup env) {
  return [options = std::move(options), env = std::move(env)](const std::string& key) -> std::optional<Setting> {
    if (const auto found = options.find(key); found != options.end()) return Setting{found->second, "option " + key};
    const std::string variable = option_variable(key);
    if (std::optional<std::string> value = env(variable.c_str())) return Setting{*value, variable};
    return std::nullopt;
  };
}

std::vector<std::string> overridden_variables(const std::map<std::string, std::string>& options, const EnvLookup& env) {
  std::vector<std::string> lines;
  for (const auto& [key, value] : options) {
    const std::string variable = option_variable(key);
    const std::optional<std::string> set = env(variable.c_str());
    if (set && *set != value)
      lines.push_back("option " + key + "='" + value + "' overrides " + variable + "='" + *set + "'");
  }
  return lines;
}

H2_Status option_list(const H2_OptionInfo** infos, size_t* count) {
  return guarded("option_list", [&] {
    require(infos, "infos");
    require(count, "count");
    *infos = kOptions;
    *count = std::size(kOptions);
  });
}

}  // namespace h2::cpu_reference
