// A vocabulary of aclnn calls on whole tensors, each one operator enqueued on the stream: what the
// composed operators (the optimizer family, cross-entropy, rotary, attention, softmax's mask) are
// written in, so each of them reads as its formula.
#pragma once

#include "aclnn_call.hpp"

namespace h2::ascend {

struct TensorOps {
  Stream& stream;
  const AclnnLibrary& nn = runtime().aclnn();

  void muls(const H2_Tensor& y, const H2_Tensor& x, double s) {
    AclTensor in(x), out(y);
    AclScalar factor(s);
    run_aclnn(
        stream, "aclnnMuls",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnMulsWorkspace(in.get(), factor.get(), out.get(), size, e);
        },
        nn.aclnnMuls);
  }
  void divs(const H2_Tensor& y, const H2_Tensor& x, double s) {
    AclTensor in(x), out(y);
    AclScalar divisor(s);
    run_aclnn(
        stream, "aclnnDivs",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnDivsWorkspace(in.get(), divisor.get(), out.get(), size, e);
        },
        nn.aclnnDivs);
  }
  void adds(const H2_Tensor& y, const H2_Tensor& x, double s) {
    AclTensor in(x), out(y);
    AclScalar value(s), one(1.0);
    run_aclnn(
        stream, "aclnnAdds",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnAddsWorkspace(in.get(), value.get(), one.get(), out.get(), size, e);
        },
        nn.aclnnAdds);
  }
  // y = a + alpha * b, or a - alpha * b with subtract.
  void add(const H2_Tensor& y, const H2_Tensor& a, const H2_Tensor& b, double alpha, bool subtract = false) {
    AclTensor first(a), second(b), out(y);
    AclScalar factor(alpha);
    const auto plan = subtract ? nn.aclnnSubWorkspace : nn.aclnnAddWorkspace;
    run_aclnn(
        stream, subtract ? "aclnnSub" : "aclnnAdd",
        [&](uint64_t* size, aclOpExecutor** e) {
          return plan(first.get(), second.get(), factor.get(), out.get(), size, e);
        },
        subtract ? nn.aclnnSub : nn.aclnnAdd);
  }
  void binary(const char* name, aclnnBinaryGetWorkspaceSizeFn plan, aclnnRunFn run, const H2_Tensor& y,
              const H2_Tensor& a, const H2_Tensor& b) {
    AclTensor first(a), second(b), out(y);
    run_aclnn(
        stream, name,
        [&](uint64_t* size, aclOpExecutor** e) { return plan(first.get(), second.get(), out.get(), size, e); }, run);
  }
  void unary(const char* name, aclnnUnaryGetWorkspaceSizeFn plan, aclnnRunFn run, const H2_Tensor& y,
             const H2_Tensor& x) {
    AclTensor in(x), out(y);
    run_aclnn(
        stream, name, [&](uint64_t* size, aclOpExecutor** e) { return plan(in.get(), out.get(), size, e); }, run);
  }
  void scalar_op(const char* name, aclnnScalarGetWorkspaceSizeFn plan, aclnnRunFn run, const H2_Tensor& y,
                 const H2_Tensor& x, double s) {
    AclTensor in(x), out(y);
    AclScalar value(s);
    run_aclnn(
        stream, name,
        [&](uint64_t* size, aclOpExecutor** e) { return plan(in.get(), value.get(), out.get(), size, e); }, run);
  }
  // The sum of every element of x into the F32 scalar y.
  void sum_all(const H2_Tensor& y, const H2_Tensor& x) {
    AclTensor in(x), out(y);
    AclIntArray dims(all_dims(x));
    run_aclnn(
        stream, "aclnnReduceSum",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnReduceSumWorkspace(in.get(), dims.get(), false, ACL_FLOAT, out.get(), size, e);
        },
        nn.aclnnReduceSum);
  }
  void max_all(const H2_Tensor& y, const H2_Tensor& x) {
    AclTensor in(x), out(y);
    AclIntArray dims(all_dims(x));
    run_aclnn(
        stream, "aclnnAmax",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnAmaxWorkspace(in.get(), dims.get(), false, out.get(), size, e);
        },
        nn.aclnnAmax);
  }
  // y[i] = start + i * step for the 1-D y. aclnnArange counts ceil((end - start) / step) elements: an
  // end half a step short of the last element's successor gives exactly y's count whatever the
  // rounding of the division.
  void arange(const H2_Tensor& y, double start, double step) {
    AclTensor out(y);
    const double count = static_cast<double>(y.shape[0]);
    AclScalar first(start), end(start + (count - 0.5) * step), by(step);
    run_aclnn(
        stream, "aclnnArange",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnArangeWorkspace(first.get(), end.get(), by.get(), out.get(), size, e);
        },
        nn.aclnnArange);
  }
  void fill(const H2_Tensor& y, double value) {
    AclTensor out(y);
    AclScalar v(value);
    run_aclnn(
        stream, "aclnnInplaceFillScalar",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnInplaceFillScalarWorkspace(out.get(), v.get(), size, e);
        },
        nn.aclnnInplaceFillScalar);
  }
  // y = cond ? a : b.
  void where(const H2_Tensor& y, const H2_Tensor& cond, const H2_Tensor& a, const H2_Tensor& b) {
    AclTensor c(cond), first(a), second(b), out(y);
    run_aclnn(
        stream, "aclnnSWhere",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnSWhereWorkspace(c.get(), first.get(), second.get(), out.get(), size, e);
        },
        nn.aclnnSWhere);
  }
  // y = the largest of x over `dims` (kept with size 1 when keep), in x's dtype.
  void amax(const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep) {
    AclTensor in(x), out(y);
    AclIntArray reduced(dims);
    run_aclnn(
        stream, "aclnnAmax",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnAmaxWorkspace(in.get(), reduced.get(), keep, out.get(), size, e);
        },
        nn.aclnnAmax);
  }
  // y = the sum (or mean) of x over `dims`, into y's dtype.
  void sum(const H2_Tensor& y, const H2_Tensor& x, const std::vector<int64_t>& dims, bool keep, bool mean = false) {
    AclTensor in(x), out(y);
    AclIntArray reduced(dims);
    const auto plan = mean ? nn.aclnnMeanWorkspace : nn.aclnnReduceSumWorkspace;
    run_aclnn(
        stream, mean ? "aclnnMean" : "aclnnReduceSum",
        [&](uint64_t* size, aclOpExecutor** e) {
          return plan(in.get(), reduced.get(), keep, acl_dtype(y.dtype), out.get(), size, e);
        },
        mean ? nn.aclnnMean : nn.aclnnReduceSum);
  }
  void gather(const H2_Tensor& y, const H2_Tensor& x, int64_t dim, const H2_Tensor& index) {
    AclTensor in(x), where(index), out(y);
    run_aclnn(
        stream, "aclnnGather",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnGatherWorkspace(in.get(), dim, where.get(), out.get(), size, e);
        },
        nn.aclnnGather);
  }
  // y[index along dim] += src, in place.
  void scatter_add(const H2_Tensor& y, int64_t dim, const H2_Tensor& index, const H2_Tensor& src) {
    AclTensor target(y), where(index), from(src);
    run_aclnn(
        stream, "aclnnScatterAdd",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnScatterAddWorkspace(target.get(), dim, where.get(), from.get(), target.get(), size, e);
        },
        nn.aclnnScatterAdd);
  }
  // c = alpha * a @ b for 3-D a, b, c of one dtype (batch 1 broadcasts); c is not read.
  void bmm(const H2_Tensor& c, const H2_Tensor& a, const H2_Tensor& b, double alpha) {
    AclTensor first(a), second(b), out(c);
    AclScalar scale(alpha), zero(0.0);
    const int8_t cube = c.dtype == H2_DTYPE_F32 ? KEEP_DTYPE : USE_FP32_ADD;
    run_aclnn(
        stream, "aclnnBaddbmm",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnBaddbmmWorkspace(out.get(), first.get(), second.get(), zero.get(), scale.get(), out.get(),
                                          cube, size, e);
        },
        nn.aclnnBaddbmm);
  }
  void masked_fill(const H2_Tensor& y, const H2_Tensor& mask, double value) {
    AclTensor out(y), m(mask);
    AclScalar v(value);
    run_aclnn(
        stream, "aclnnInplaceMaskedFillScalar",
        [&](uint64_t* size, aclOpExecutor** e) {
          return nn.aclnnInplaceMaskedFillScalarWorkspace(out.get(), m.get(), v.get(), size, e);
        },
        nn.aclnnInplaceMaskedFillScalar);
  }
};

}  // namespace h2::ascend
