#include "unique_name.hpp"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <random>

namespace h2::dicomm::detail {

UniqueName unique_name(const std::string& prefix) {
  std::random_device random;
  const uint64_t nonce = (static_cast<uint64_t>(random()) << 32) ^ random();
  char suffix[48];
  std::snprintf(suffix, sizeof suffix, "%d-%016" PRIx64, static_cast<int>(getpid()), nonce);
  return {prefix + suffix, nonce};
}

}  // namespace h2::dicomm::detail
