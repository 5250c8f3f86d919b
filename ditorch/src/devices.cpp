// The H2 runtime behind DiTorch, the LibTorch index of each H2 device, one stream per device, the
// allocator LibTorch's PrivateUse1 tensors take their memory from, and the device guard that keeps
// LibTorch's current device.
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

#include "bridge.hpp"
#include "h2torch/h2torch.hpp"

namespace h2torch {
namespace {

struct Devices {
  std::unique_ptr<h2::Runtime> runtime;
  std::vector<h2::Device> devices;
  std::vector<std::unique_ptr<h2::Stream>> streams;
};

// "cpu-reference:0,ascend:0" -> the devices, in that order.
std::vector<h2::Device> chosen_devices(const h2::Runtime& runtime, const std::string& list) {
  std::vector<h2::Device> chosen;
  std::stringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    const size_t colon = item.rfind(':');
    TORCH_CHECK(colon != std::string::npos && colon + 1 < item.size(), "H2_TORCH_DEVICES: '", item,
                "' is not PLUGIN:INDEX (e.g. cpu-reference:0)");
    int index = -1;
    try {
      index = std::stoi(item.substr(colon + 1));
    } catch (const std::exception&) {
    }
    TORCH_CHECK(index >= 0, "H2_TORCH_DEVICES: '", item, "' has no device index");
    try {
      chosen.push_back(runtime.device(item.substr(0, colon), index));
    } catch (const h2::Error& e) {
      TORCH_CHECK(false, "H2_TORCH_DEVICES: ", item, ": ", e.what());
    }
  }
  return chosen;
}

// Never destroyed: the plugins' own state, loaded after this was made, is gone by the time static
// destructors would reach it at exit (and tensors may outlive main).
Devices& devices() {
  static Devices& state = *new Devices();
  static std::once_flag made;
  std::call_once(made, [] {
    state.runtime = std::make_unique<h2::Runtime>();
    const char* list = std::getenv("H2_TORCH_DEVICES");
    state.devices = list != nullptr && *list != '\0' ? chosen_devices(*state.runtime, list) : state.runtime->devices();
    for (const h2::Device& d : state.devices) state.streams.push_back(std::make_unique<h2::Stream>(d.create_stream()));
    // Registered after the plugins were loaded, so it runs before their state goes: the streams are
    // drained and destroyed while the plugins can still do it.
    std::atexit([] {
      for (auto& s : state.streams) {
        try {
          s->synchronize();
        } catch (...) {
        }
      }
      state.streams.clear();
    });
  });
  return state;
}

thread_local c10::DeviceIndex current_index = 0;

void check_index(int index) {
  TORCH_CHECK_INDEX(index >= 0 && index < device_count(), "privateuseone:", index, " does not exist: H2 has ",
                    device_count(), " device(s) (H2_TORCH_DEVICES, or every device of `h2 devices`)");
}

// LibTorch's PrivateUse1 memory: a buffer from the device's caching allocator for work on the
// device's stream (freeing it never waits), kept alive by the DataPtr's context.
struct Allocator final : c10::Allocator {
  c10::DataPtr allocate(size_t bytes) const override {
    const c10::DeviceIndex index = current_index;
    check_index(index);
    const c10::Device where(c10::DeviceType::PrivateUse1, index);
    if (bytes == 0) return {nullptr, nullptr, &no_delete, where};
    auto* holder = new std::shared_ptr<h2::DeviceBuffer>();
    try {
      *holder = std::make_shared<h2::DeviceBuffer>(device(index).allocate(bytes, stream(index)));
    } catch (const h2::Error& e) {
      delete holder;
      TORCH_CHECK(false, "privateuseone:", static_cast<int>(index), " (", device(index).label(), "): ", e.what());
    }
    return {(*holder)->data(), holder, &release, where};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  static void release(void* holder) { delete static_cast<std::shared_ptr<h2::DeviceBuffer>*>(holder); }
  static void no_delete(void*) {}
};

Allocator allocator;

struct GuardImpl final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device d) const override {
    const c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {c10::DeviceType::PrivateUse1, current_index}; }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == c10::DeviceType::PrivateUse1, "not an H2 device: ", d);
    check_index(d.index());
    current_index = d.index();
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { current_index = d.index(); }
  // One stream per device: LibTorch's default stream is the device's H2 stream.
  c10::Stream getStream(c10::Device d) const noexcept override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream exchangeStream(c10::Stream s) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  // LibTorch's events are H2 events recorded on the device's stream (the autograd engine and
  // torch.Event use them to order work across streams and devices).
  void record(void** event, const c10::Stream& s, const c10::DeviceIndex index,
              const c10::EventFlag /*flag*/) const override {
    TORCH_CHECK(index == -1 || index == s.device_index(), "event of privateuseone:", static_cast<int>(index),
                " recorded on a stream of privateuseone:", static_cast<int>(s.device_index()));
    if (*event == nullptr) *event = new h2::Event(device(s.device_index()).create_event(false));
    static_cast<h2::Event*>(*event)->record(stream(s.device_index()));
  }
  void block(void* event, const c10::Stream& s) const override {
    if (event != nullptr) stream(s.device_index()).wait(*static_cast<h2::Event*>(event));
  }
  bool queryEvent(void* event) const override { return event == nullptr || static_cast<h2::Event*>(event)->ready(); }
  void destroyEvent(void* event, const c10::DeviceIndex /*index*/) const noexcept override {
    delete static_cast<h2::Event*>(event);
  }
  bool queryStream(const c10::Stream& s) const override { return stream(s.device_index()).ready(); }
  void synchronizeStream(const c10::Stream& s) const override { stream(s.device_index()).synchronize(); }
  c10::DeviceIndex deviceCount() const noexcept override {
    try {
      return static_cast<c10::DeviceIndex>(device_count());
    } catch (...) {
      return 0;
    }
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, GuardImpl);

struct RegisterAllocator {
  RegisterAllocator() { c10::SetAllocator(c10::DeviceType::PrivateUse1, &allocator); }
} register_allocator;

}  // namespace

int device_count() {
  return static_cast<int>(devices().devices.size());
}

h2::Device& device(int index) {
  check_index(index);
  return devices().devices[static_cast<size_t>(index)];
}

h2::Stream& stream(int index) {
  check_index(index);
  return *devices().streams[static_cast<size_t>(index)];
}

void synchronize() {
  for (auto& s : devices().streams) s->synchronize();
}

h2::MemoryStats memory_stats(int index) {
  return h2::memory_stats(device(index));
}

c10::Allocator* torch_allocator() {
  return &allocator;
}

}  // namespace h2torch
