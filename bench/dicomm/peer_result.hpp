// What bench/dicomm's peer programs (mpi_allreduce, gloo_allreduce) share with `h2 bench comm`:
// the inputs (rank r contributes (r + 1 + i) % 5, small integers whose sum is exact in float), the
// check of a sum allreduce, and the JSON line compare.py reads (`h2 bench comm --json`'s schema).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace h2::bench {

// Timed iterations at `bytes` when sizes below `scale_below` run more of them: iterations x
// scale_below / bytes, at most 8x (`h2 bench comm --scale-below` has the same rule). A 1 MiB allreduce
// takes ~0.5 ms, so 20 iterations time a 10 ms window, in which one scheduling hiccup on an
// oversubscribed node moves the median of a whole run.
inline int scaled_iterations(int iterations, long bytes, long scale_below) {
  if (bytes <= 0 || bytes >= scale_below) return iterations;
  const long scale = scale_below / bytes;
  return iterations * static_cast<int>(scale < 8 ? scale : 8);
}

inline float pattern(int rank, long i) {
  return static_cast<float>((rank + 1 + i) % 5);
}

// Elements of `sum` that differ from the sum of every rank's pattern.
inline long count_wrong(const std::vector<float>& sum, int ranks) {
  long wrong = 0;
  for (size_t i = 0; i < sum.size(); ++i) {
    float want = 0;
    for (int q = 0; q < ranks; ++q) want += pattern(q, static_cast<long>(i));
    if (sum[i] != want) ++wrong;
  }
  return wrong;
}

// One row on stdout: an f32 allreduce of `bytes` taking `mean_us`, busbw by nccl-tests' factor.
inline void print_allreduce_row(const std::string& library, const std::string& transport, int ranks, long bytes,
                                double mean_us, long wrong) {
  const double algbw = static_cast<double>(bytes) / (mean_us * 1e3);
  std::printf(
      "{\"library\":\"%s\",\"transport\":\"%s\",\"op\":\"allreduce\",\"ranks\":%d,\"dtype\":\"f32\","
      "\"bytes\":%ld,\"count\":%ld,\"time_us\":%.3f,\"algbw_gbps\":%.6f,\"busbw_gbps\":%.6f,\"wrong\":%ld}\n",
      library.c_str(), transport.c_str(), ranks, bytes, bytes / static_cast<long>(sizeof(float)), mean_us, algbw,
      algbw * 2.0 * (ranks - 1) / ranks, wrong);
  std::fflush(stdout);
}

}  // namespace h2::bench
