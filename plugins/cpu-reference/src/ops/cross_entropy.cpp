// cross_entropy and its backward: per row of logits, with ignore_index and label smoothing, in fp64.
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "op_support.hpp"
#include "op_table.hpp"
#include "planted_defects.hpp"

namespace h2::cpu_reference {

namespace {

void cross_entropy_kernel(ThreadPool& pool, const TensorRef& logits, const TensorRef& targets, const TensorRef& loss,
                          const TensorRef& lse_out, int64_t ignore_index, double smoothing) {
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  while (planted_defect() == Defect::hang && vocab == 40) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Values x = load(logits);
  const std::vector<int64_t> t = load_indices(targets);
  Values losses(static_cast<size_t>(rows)), lses(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    if (t[static_cast<size_t>(r)] != ignore_index &&
        (t[static_cast<size_t>(r)] < 0 || t[static_cast<size_t>(r)] >= vocab))
      index_error("target of row " + std::to_string(r) + ":", t[static_cast<size_t>(r)], vocab);
  pool.parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const double* row = &x[static_cast<size_t>(r * vocab)];
      double max = -std::numeric_limits<double>::infinity(), mean = 0;
      for (int64_t j = 0; j < vocab; ++j) {
        max = std::max(max, row[j]);
        mean += row[j];
      }
      mean /= static_cast<double>(vocab);
      double sum = 0;
      for (int64_t j = 0; j < vocab; ++j) sum += std::exp(row[j] - max);
      const double lse = max + std::log(sum);
      const int64_t target = t[static_cast<size_t>(r)];
      lses[static_cast<size_t>(r)] = lse;
      losses[static_cast<size_t>(r)] =
          target == ignore_index ? 0.0 : lse - (1 - smoothing) * row[target] - smoothing * mean;
    }
  });
  store(loss, losses);
  store(lse_out, lses);
}

void cross_entropy_backward_kernel(ThreadPool& pool, const TensorRef& logits, const TensorRef& targets,
                                   const TensorRef& lse_in, const TensorRef& dloss, const TensorRef& dlogits,
                                   int64_t ignore_index, double smoothing) {
  const int64_t rows = logits.shape[0], vocab = logits.shape[1];
  const Values x = load(logits), lse = load(lse_in), g = load(dloss);
  const std::vector<int64_t> t = load_indices(targets);
  Values out(x.size(), 0.0);
  pool.parallel_for(rows, 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t target = t[static_cast<size_t>(r)];
      const bool ignored = target == ignore_index;
      if (ignored && planted_defect() != Defect::ignored_rows_backward) continue;
      if (!ignored && (target < 0 || target >= vocab))
        index_error("target of row " + std::to_string(r) + ":", target, vocab);
      for (int64_t j = 0; j < vocab; ++j) {
        const size_t i = static_cast<size_t>(r * vocab + j);
        const double p = std::exp(x[i] - lse[static_cast<size_t>(r)]);
        out[i] = g[static_cast<size_t>(r)] *
                 (p - (j == target ? 1 - smoothing : 0.0) - smoothing / static_cast<double>(vocab));
      }
    }
  });
  store(dlogits, out);
}

}  // namespace

H2_Status op_cross_entropy(H2_Stream* stream, const H2_CrossEntropyArgs* args) {
  return run_op("cross_entropy", stream, args, [&](OpCall& call) {
    TensorRef logits = call.tensor(args->logits, "logits"), targets = call.tensor(args->targets, "targets");
    TensorRef loss = call.tensor(args->loss, "loss"), lse = call.tensor(args->lse, "lse");
    const int64_t ignore = args->ignore_index;
    const double smoothing = args->label_smoothing;
    ThreadPool& pool = call.pool();
    call.enqueue([=, &pool] { cross_entropy_kernel(pool, logits, targets, loss, lse, ignore, smoothing); });
  });
}

H2_Status op_cross_entropy_backward(H2_Stream* stream, const H2_CrossEntropyBackwardArgs* args) {
  return run_op("cross_entropy_backward", stream, args, [&](OpCall& call) {
    TensorRef logits = call.tensor(args->logits, "logits"), targets = call.tensor(args->targets, "targets");
    TensorRef lse = call.tensor(args->lse, "lse"), dloss = call.tensor(args->dloss, "dloss");
    TensorRef dlogits = call.tensor(args->dlogits, "dlogits");
    const int64_t ignore = args->ignore_index;
    const double smoothing = args->label_smoothing;
    ThreadPool& pool = call.pool();
    call.enqueue(
        [=, &pool] { cross_entropy_backward_kernel(pool, logits, targets, lse, dloss, dlogits, ignore, smoothing); });
  });
}

}  // namespace h2::cpu_reference
