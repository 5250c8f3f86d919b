#include "errno_text.hpp"

#include <cstring>

namespace h2::dicomm::detail {

namespace {

// Picks the right overload for whichever strerror_r glibc exposes.
[[maybe_unused]] std::string strerror_result(int result, const char* buffer) {
  return result == 0 ? std::string(buffer) : std::string("unknown error");
}
[[maybe_unused]] std::string strerror_result(const char* result, const char*) {
  return std::string(result);
}

}  // namespace

std::string errno_text(int err) {
  char buffer[256] = {};
  return strerror_result(strerror_r(err, buffer, sizeof(buffer)), buffer);
}

}  // namespace h2::dicomm::detail
