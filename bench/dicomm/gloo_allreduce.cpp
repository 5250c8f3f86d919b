// The Gloo side of bench/dicomm/compare.py: Gloo's chunked ring and halving-doubling allreduce over
// its TCP transport on 127.0.0.1, timed the way `h2 bench comm` times DiComm (warm-up, then the mean
// over iterations of the slowest rank), the result checked, one JSON line per size on rank 0's
// stdout in `h2 bench comm --json`'s schema. Started by `h2 launch`, which sets H2_RANK and
// H2_WORLD_SIZE; the ranks meet through a Gloo FileStore in STORE_DIR.
//
//   h2 launch -n N -- gloo_allreduce ring_chunked|halving_doubling STORE_DIR MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "peer_result.hpp"

namespace {

using h2::bench::pattern;

int environment_int(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) throw std::runtime_error(std::string(name) + " is not set: start this under h2 launch");
  return std::atoi(value);
}

template <typename T>
std::unique_ptr<gloo::Algorithm> make_allreduce(
    const std::string& algorithm, const std::shared_ptr<gloo::Context>& context, T* data, long count,
    const gloo::ReductionFunction<T>* fn = gloo::ReductionFunction<T>::sum) {
  const std::vector<T*> pointers{data};
  if (algorithm == "ring_chunked")
    return std::make_unique<gloo::AllreduceRingChunked<T>>(context, pointers, static_cast<int>(count), fn);
  return std::make_unique<gloo::AllreduceHalvingDoubling<T>>(context, pointers, static_cast<int>(count), fn);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 8 && argc != 9) {
    std::fprintf(stderr,
                 "usage: gloo_allreduce ring_chunked|halving_doubling STORE_DIR MIN_BYTES MAX_BYTES FACTOR ITERS "
                 "WARMUP [SCALE_BELOW]\n");
    return 2;
  }
  const std::string algorithm = argv[1];
  if (algorithm != "ring_chunked" && algorithm != "halving_doubling")
    throw std::runtime_error("unknown algorithm " + algorithm);
  const long min_bytes = std::atol(argv[3]), max_bytes = std::atol(argv[4]), factor = std::atol(argv[5]);
  const int base_iterations = std::atoi(argv[6]), warmup = std::atoi(argv[7]);
  const long scale_below = argc > 8 ? std::atol(argv[8]) : 0;
  const int rank = environment_int("H2_RANK"), size = environment_int("H2_WORLD_SIZE");

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[2]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  int status = 0;
  for (long bytes = min_bytes; bytes <= max_bytes && factor > 1; bytes *= factor) {
    const long count = bytes / static_cast<long>(sizeof(float));
    const int iterations = h2::bench::scaled_iterations(base_iterations, bytes, scale_below);
    std::vector<float> buffer(static_cast<size_t>(count));
    // One algorithm object per buffer, built before timing (Gloo's own benchmark does the same):
    // building one allocates and connects its buffers.
    const auto reduce = make_allreduce(algorithm, context, buffer.data(), count);
    for (int i = 0; i < warmup; ++i) reduce->run();
    gloo::BarrierAllToAll(context).run();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i) reduce->run();
    double mean_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iterations;
    make_allreduce<double>("ring_chunked", context, &mean_us, 1, gloo::ReductionFunction<double>::max)->run();

    for (long i = 0; i < count; ++i) buffer[static_cast<size_t>(i)] = pattern(rank, i);
    reduce->run();
    double wrong = static_cast<double>(h2::bench::count_wrong(buffer, size));
    make_allreduce<double>("ring_chunked", context, &wrong, 1)->run();
    if (wrong > 0) status = 1;
    if (rank == 0)
      h2::bench::print_allreduce_row("gloo", "tcp " + algorithm, size, bytes, mean_us, static_cast<long>(wrong));
    if (bytes > max_bytes / factor) break;
  }
  return status;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gloo_allreduce: %s\n", e.what());
  return 1;
}
