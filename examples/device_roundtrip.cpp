// A program that links libh2core alone (see the README): it sends a buffer through every device of
// every loaded plugin, one hop after the next, each hop ordered after the previous one by an event,
// and checks that the bytes come back unchanged. Usage: device_roundtrip [BYTES]
#include <h2/h2.hpp>

#include <cstdlib>
#include <iostream>
#include <numeric>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1 << 20);
  if (bytes == 0) {
    std::cerr << "device_roundtrip: BYTES must be a positive number\n";
    return 2;
  }
  try {
    h2::Runtime runtime;
    if (runtime.devices().empty()) {
      std::cerr << "device_roundtrip: no devices; run `h2 devices` to see why\n";
      return 1;
    }
    std::vector<uint8_t> data(bytes);
    std::iota(data.begin(), data.end(), 0);
    std::vector<uint8_t> carried = data;

    for (const h2::Device& device : runtime.devices()) {
      h2::Stream stream = device.create_stream();
      h2::DeviceBuffer first = device.allocate(bytes);
      h2::DeviceBuffer second = device.allocate(bytes);
      h2::Event start = device.create_event();
      h2::Event end = device.create_event();
      start.record(stream);
      stream.copy_from_host(first, carried.data(), bytes);
      stream.copy(second, 0, first, 0, bytes);
      stream.copy_to_host(carried.data(), second, bytes);
      end.record(stream);
      end.synchronize();
      std::cout << device.label() << ": " << bytes << " bytes in and out in " << h2::Event::elapsed_ms(start, end)
                << " ms\n";
    }
    if (carried != data) {
      std::cerr << "device_roundtrip: the data came back changed\n";
      return 1;
    }
    std::cout << "ok: " << runtime.devices().size() << " device(s)\n";
    return 0;
  } catch (const h2::Error& e) {
    std::cerr << "device_roundtrip: " << e.what() << "\n";
    return 1;
  }
}
