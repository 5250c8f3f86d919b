// libFuzzer target: any bytes a connection can send to rank 0's rendezvous store, to a fresh store
// of a 2-rank job with the token "fuzz-token" for every input: a stranger's garbage, or, where the
// input starts with a valid hello (scripts/fuzz.sh seeds some), rank 1's requests. The store must
// answer, refuse or drop the connection; a crash, a hang or a sanitizer report is a bug.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "../src/store/socket.hpp"
#include "../src/store/store_server.hpp"

namespace {

using h2::dicomm::detail::Clock;

// What the store sends back, until it closes the connection or has been quiet for 20 ms.
void drain(int fd) {
  char buffer[4096];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) return;
    if (::recv(fd, buffer, sizeof buffer, 0) <= 0) return;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  h2::dicomm::detail::StoreServer server("127.0.0.1", 0, 2, "fuzz-token", std::chrono::seconds(10));
  std::string error;
  const auto addresses = h2::dicomm::detail::resolve("127.0.0.1", server.port(), error);
  h2::dicomm::detail::Fd fd =
      h2::dicomm::detail::connect_before(addresses.at(0), Clock::now() + std::chrono::seconds(5), error);
  if (!fd.valid()) __builtin_trap();  // the store did not accept a connection
  h2::dicomm::detail::send_all(fd.get(), reinterpret_cast<const char*>(data), size);
  ::shutdown(fd.get(), SHUT_WR);
  drain(fd.get());
  fd.reset();
  server.stop(Clock::now());
  return 0;
}
