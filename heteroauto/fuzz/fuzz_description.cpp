// libFuzzer target: any bytes as a cluster, model or plan description, as `h2 plan` and `h2 train`
// read them (H2_FUZZ_CLUSTER, H2_FUZZ_MODEL or H2_FUZZ_PLAN picks which at build time). Every input
// must end in a description or one of the errors the tools report (DescriptionError, a JSON parse
// error, nesting too deep); anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>

#include "h2/heteroauto/description.hpp"
#include "h2/heteroauto/plan.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  try {
    const nlohmann::json json = h2::heteroauto::parse_json_bounded(in);
#if defined(H2_FUZZ_CLUSTER)
    h2::heteroauto::parse_cluster(json);
#elif defined(H2_FUZZ_MODEL)
    h2::heteroauto::parse_model(json);
#else
    h2::heteroauto::plan_from_json(json);
#endif
  } catch (const h2::heteroauto::DescriptionError&) {
  } catch (const nlohmann::json::exception&) {  // invalid JSON, or a number beyond a double
  } catch (const std::length_error&) {          // nested deeper than kMaxJsonDepth
  }
  return 0;
}
