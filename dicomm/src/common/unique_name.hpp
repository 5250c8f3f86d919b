// Names for what DiComm puts in /dev/shm (the node transport's segment, libfabric shm's region).
#pragma once

#include <cstdint>
#include <string>

namespace h2::dicomm::detail {

struct UniqueName {
  std::string name;  // "<prefix><pid>-<nonce as 16 hex digits>"
  uint64_t nonce;    // 64 random bits
};

// A name no other process uses, nor a killed one whose pid this process now has: the pid alone
// would meet the leftovers of such a process.
UniqueName unique_name(const std::string& prefix);

}  // namespace h2::dicomm::detail
