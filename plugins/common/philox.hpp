// Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// the counter-based generator every plugin uses, so that the same seed and offset give the same
// numbers on every device (see "Random numbers" in plugin_abi.h).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define H2_HOST_DEVICE __host__ __device__
#else
#define H2_HOST_DEVICE
#endif

namespace h2::plugin {

// Plain structs rather than std::array, so the same code compiles for CUDA devices.
struct PhiloxBlock {
  uint32_t w[4];
  H2_HOST_DEVICE uint32_t operator[](size_t i) const { return w[i]; }
  H2_HOST_DEVICE bool operator==(const PhiloxBlock& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
};

struct PhiloxKey {
  uint32_t k[2];
};

H2_HOST_DEVICE inline PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * counter.w[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * counter.w[2];
    counter = {{static_cast<uint32_t>(p1 >> 32) ^ counter.w[1] ^ key.k[0], static_cast<uint32_t>(p1),
                static_cast<uint32_t>(p0 >> 32) ^ counter.w[3] ^ key.k[1], static_cast<uint32_t>(p0)}};
    key = {{key.k[0] + kWeyl0, key.k[1] + kWeyl1}};
  }
  return counter;
}

// The block for counter value c under `seed`, as the ABI defines it.
H2_HOST_DEVICE inline PhiloxBlock philox_block(uint64_t seed, uint64_t c) {
  return philox4x32_10({{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0, 0}},
                       {{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
}

}  // namespace h2::plugin
