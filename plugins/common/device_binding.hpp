// Which device the calling thread made current, for vendor runtimes whose "current device" is per
// thread (AscendCL's aclrtSetDevice, CNRT's cnrtSetDevice): cached per thread so that a call already
// bound makes no runtime call. Keyed by a generation, since a runtime object made after a shutdown may
// reuse an old one's address while the vendor has forgotten the binding.
#pragma once

#include <atomic>
#include <cstdint>

namespace h2::plugin {

class DeviceBinding {
 public:
  DeviceBinding() : generation_(++generations()) {}

  // Calls set_device(device) unless the calling thread is bound to `device` already.
  template <typename SetDevice>
  void bind(int32_t device, SetDevice set_device) const {
    Bound& current = bound();
    if (current.generation == generation_ && current.device == device) return;
    set_device(device);
    current = {generation_, device};
  }
  // Forgets the calling thread's binding (the runtime was reset or is going).
  static void forget() { bound() = Bound{}; }

 private:
  struct Bound {
    uint64_t generation = 0;
    int32_t device = -1;
  };
  static Bound& bound() {
    thread_local Bound current;
    return current;
  }
  static std::atomic<uint64_t>& generations() {
    static std::atomic<uint64_t> count{0};
    return count;
  }
  uint64_t generation_;
};

}  // namespace h2::plugin
