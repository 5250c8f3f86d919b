// Emulated aclnn reductions: ReduceSum, Mean, Amax (NaN propagates) and MaxDim (the first maximum's
// index), accumulating in FP32 in row-major order of the input (FP64 for DOUBLE).
#include <cmath>
#include <limits>

#include "emulated_op.hpp"
#include "tensor_access.hpp"

using namespace ascend_emulator;

namespace {

struct Reduction {
  aclTensor in, out;
  std::vector<bool> reduced;  // per input dimension
  int64_t out_count = 0;
};

// Which dimensions `dims` names (negative from the end), and out's shape checked against them.
Reduction plan_reduction(const char* op, const aclTensor* self, const std::vector<int64_t>& dims, bool keep,
                         const aclTensor* out) {
  check_tensor(self, "self");
  check_tensor(out, "out");
  Reduction r{*self, *out, std::vector<bool>(self->view.size(), false), 0};
  const auto rank = static_cast<int64_t>(self->view.size());
  for (int64_t dim : dims) {
    const int64_t d = dim < 0 ? dim + rank : dim;
    if (d < 0 || d >= rank)
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": dimension " + std::to_string(dim) + " is out of range");
    r.reduced[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> expected;
  for (size_t d = 0; d < self->view.size(); ++d) {
    if (!r.reduced[d])
      expected.push_back(self->view[d]);
    else if (keep)
      expected.push_back(1);
  }
  if (expected != out->view)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": out is " + shape_text(out->view) +
                                             ", the reduction gives " + shape_text(expected));
  r.out_count = element_count(expected);
  return r;
}

// The output element an input element (row-major `index`) reduces into.
int64_t target_of(const Reduction& r, int64_t index) {
  int64_t target = 0, scale = 1;
  for (size_t d = r.in.view.size(); d-- > 0;) {
    const int64_t size = r.in.view[d];
    const int64_t coordinate = index % size;
    index /= size;
    if (r.reduced[d]) continue;
    target += coordinate * scale;
    scale *= size;
  }
  return target;
}

template <typename Accumulate, typename Finish>
std::function<void(void*)> reduce_kernel(Reduction r, double initial, Accumulate accumulate, Finish finish) {
  return [r, initial, accumulate, finish](void*) {
    const Elements in(r.in), out(r.out);
    const bool wide = r.in.dtype == ACL_DOUBLE;
    std::vector<double> totals(static_cast<size_t>(r.out_count), initial);
    std::vector<int64_t> counts(static_cast<size_t>(r.out_count), 0);
    for (int64_t i = 0; i < in.count(); ++i) {
      auto& total = totals[static_cast<size_t>(target_of(r, i))];
      total = wide ? accumulate(total, in.load(i))
                   : static_cast<float>(accumulate(static_cast<float>(total), static_cast<float>(in.load(i))));
      ++counts[static_cast<size_t>(target_of(r, i))];
    }
    for (int64_t o = 0; o < r.out_count; ++o)
      out.store(o, finish(totals[static_cast<size_t>(o)], counts[static_cast<size_t>(o)], wide));
  };
}

std::vector<int64_t> dims_of(const aclIntArray* dims) {
  if (dims == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "dims is NULL");
  return dims->values;
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnReduceSumGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims,
                                                             bool keep_dims, aclDataType dtype, aclTensor* out,
                                                             uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnReduceSum", workspace_size, executor, 0, [&] {
    Reduction r = plan_reduction("aclnnReduceSum", self, dims_of(dims), keep_dims, out);
    if (out->dtype != dtype) throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnReduceSum: out is not of the dtype asked for");
    return reduce_kernel(
        r, 0.0, [](auto total, auto x) { return total + x; }, [](double total, int64_t, bool) { return total; });
  });
}
H2_EMULATED_RUN(aclnnReduceSum)

ASCEND_EMULATOR_C aclnnStatus aclnnMeanGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims, bool keep_dims,
                                                        aclDataType dtype, aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  return plan_operator("aclnnMean", workspace_size, executor, 0, [&] {
    Reduction r = plan_reduction("aclnnMean", self, dims_of(dims), keep_dims, out);
    if (out->dtype != dtype) throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnMean: out is not of the dtype asked for");
    return reduce_kernel(
        r, 0.0, [](auto total, auto x) { return total + x; },
        [](double total, int64_t count, bool wide) {
          return wide ? total / static_cast<double>(count)
                      : static_cast<double>(static_cast<float>(total) / static_cast<float>(count));
        });
  });
}
H2_EMULATED_RUN(aclnnMean)

ASCEND_EMULATOR_C aclnnStatus aclnnAmaxGetWorkspaceSize(const aclTensor* self, const aclIntArray* dims, bool keep_dims,
                                                        aclTensor* out, uint64_t* workspace_size,
                                                        aclOpExecutor** executor) {
  return plan_operator("aclnnAmax", workspace_size, executor, 0, [&] {
    Reduction r = plan_reduction("aclnnAmax", self, dims_of(dims), keep_dims, out);
    if (out->dtype != self->dtype) throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnAmax: out must have self's dtype");
    return reduce_kernel(
        r, -std::numeric_limits<double>::infinity(),
        [](auto best, auto x) { return std::isnan(best) || std::isnan(x) ? NAN : std::max(best, x); },
        [](double best, int64_t, bool) { return best; });
  });
}
H2_EMULATED_RUN(aclnnAmax)

ASCEND_EMULATOR_C aclnnStatus aclnnMaxDimGetWorkspaceSize(const aclTensor* self, int64_t dim, bool keepdim,
                                                          aclTensor* out, aclTensor* indices, uint64_t* workspace_size,
                                                          aclOpExecutor** executor) {
  return plan_operator("aclnnMaxDim", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    Reduction r = plan_reduction("aclnnMaxDim", self, {dim}, keepdim, out);
    check_tensor(indices, "indices");
    if (indices->dtype != ACL_INT64 || indices->view != out->view)
      throw Error(ACLNN_ERR_PARAM_INVALID, "aclnnMaxDim: indices must be INT64 of out's shape");
    const int64_t d = dim < 0 ? dim + static_cast<int64_t>(self->view.size()) : dim;
    return [r, where = *indices, d](void*) {
      const Elements in(r.in), out(r.out), index_out(where);
      std::vector<double> best(static_cast<size_t>(r.out_count), -INFINITY);
      std::vector<int64_t> at(static_cast<size_t>(r.out_count), -1);
      const int64_t inner = [&] {
        int64_t size = 1;
        for (size_t k = static_cast<size_t>(d) + 1; k < r.in.view.size(); ++k) size *= r.in.view[k];
        return size;
      }();
      for (int64_t i = 0; i < in.count(); ++i) {
        const auto o = static_cast<size_t>(target_of(r, i));
        const double x = in.load(i);
        const int64_t position = (i / inner) % r.in.view[static_cast<size_t>(d)];
        const bool nan_seen = std::isnan(best[o]);
        if (at[o] < 0 || (!nan_seen && (std::isnan(x) || x > best[o]))) {
          best[o] = x;
          at[o] = position;
        }
      }
      for (int64_t o = 0; o < r.out_count; ++o) {
        out.store(o, best[static_cast<size_t>(o)]);
        index_out.store(o, static_cast<double>(at[static_cast<size_t>(o)]));
      }
    };
  });
}
H2_EMULATED_RUN(aclnnMaxDim)
