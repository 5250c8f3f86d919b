// Elementwise kernels as device lambdas: `launch_map(launch, n, f)` runs f(i) for every logical
// element index i in [0, n) with a grid-stride loop. Needs nvcc's --extended-lambda.
#pragma once

#include "launch.cuh"

namespace h2::cuda {

template <typename F>
__global__ void map_kernel(int64_t n, F f) {
  H2_FOR_EACH_ELEMENT(i, n) f(i);
}

template <typename F>
void launch_map(const OpLaunch& launch, int64_t n, F f) {
  if (n <= 0) return;
  map_kernel<<<grid_for(n), kThreads, 0, launch.cuda>>>(n, f);
  launch.check_launch("an elementwise kernel");
}

}  // namespace h2::cuda
