// The Open MPI side of bench/dicomm/compare.py: MPI_Allreduce(MPI_IN_PLACE, float, SUM) timed the
// way `h2 bench comm` times DiComm (warm-up, then the mean over iterations of the slowest rank), the
// result checked, one JSON line per size on rank 0's stdout in `h2 bench comm --json`'s schema.
//
//   mpirun -np N [--mca pml ob1 --mca btl self,vader] mpi_allreduce TRANSPORT MIN_BYTES MAX_BYTES FACTOR ITERS
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "peer_result.hpp"

using h2::bench::pattern;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: mpi_allreduce TRANSPORT MIN_BYTES MAX_BYTES FACTOR ITERS WARMUP [SCALE_BELOW]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::string transport = argv[1];
  const long min_bytes = std::atol(argv[2]), max_bytes = std::atol(argv[3]);
  const long factor = std::atol(argv[4]);
  const int base_iterations = std::atoi(argv[5]), warmup = std::atoi(argv[6]);
  const long scale_below = argc > 7 ? std::atol(argv[7]) : 0;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  for (long bytes = min_bytes; bytes <= max_bytes && factor > 1; bytes *= factor) {
    const long count = bytes / static_cast<long>(sizeof(float));
    const int iterations = h2::bench::scaled_iterations(base_iterations, bytes, scale_below);
    std::vector<float> buffer(static_cast<size_t>(count));
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iterations; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double mean_us = (MPI_Wtime() - start) * 1e6 / iterations;
    MPI_Allreduce(MPI_IN_PLACE, &mean_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    // One checked run on known inputs.
    for (long i = 0; i < count; ++i) buffer[static_cast<size_t>(i)] = pattern(rank, i);
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    long wrong = h2::bench::count_wrong(buffer, size);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (wrong > 0) status = 1;
    if (rank == 0) h2::bench::print_allreduce_row("mpi", transport, size, bytes, mean_us, wrong);
    if (bytes > max_bytes / factor) break;
  }
  MPI_Finalize();
  return status;
}
