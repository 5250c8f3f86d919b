// Emulated aclnn selection, comparison and factories: SWhere, InplaceMaskedFillScalar, GtScalar and Arange.
#include "elementwise.hpp"
#include "emulated_op.hpp"

using namespace ascend_emulator;

namespace {

void check_mask(const aclTensor* mask, const aclTensor* target, const char* role) {
  check_tensor(mask, role);
  if (mask->dtype != ACL_BOOL)
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(role) + " is " + dtype_name(mask->dtype) + ", not BOOL");
  if (!broadcasts(mask->view, target->view))
    throw Error(ACLNN_ERR_PARAM_INVALID, std::string(role) + " " + shape_text(mask->view) + " does not broadcast to " +
                                             shape_text(target->view));
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnSWhereGetWorkspaceSize(const aclTensor* condition, const aclTensor* self,
                                                          const aclTensor* other, aclTensor* out,
                                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnSWhere", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_float_map("aclnnSWhere", out, {self, other});
    check_mask(condition, out, "condition");
    return [c = *condition, a = *self, b = *other, y = *out](void*) {
      const Elements out_elements(y), cond(c, y.view), first(a, y.view), second(b, y.view);
      for (int64_t i = 0; i < out_elements.count(); ++i)
        out_elements.store(i, cond.load(i) != 0 ? first.load(i) : second.load(i));
    };
  });
}
H2_EMULATED_RUN(aclnnSWhere)

ASCEND_EMULATOR_C aclnnStatus aclnnInplaceMaskedFillScalarGetWorkspaceSize(aclTensor* self_ref, const aclTensor* mask,
                                                                           const aclScalar* value,
                                                                           uint64_t* workspace_size,
                                                                           aclOpExecutor** executor) {
  return plan_operator(
      "aclnnInplaceMaskedFillScalar", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
        check_float_map("aclnnInplaceMaskedFillScalar", self_ref, {});
        check_mask(mask, self_ref, "mask");
        if (value == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "value is NULL");
        const double fill = self_ref->dtype == ACL_DOUBLE ? value->value : static_cast<float>(value->value);
        return [y = *self_ref, m = *mask, fill](void*) {
          const Elements target(y), selected(m, y.view);
          for (int64_t i = 0; i < target.count(); ++i)
            if (selected.load(i) != 0) target.store(i, fill);
        };
      });
}
H2_EMULATED_RUN(aclnnInplaceMaskedFillScalar)

namespace {

// out (BOOL, self's shape) = test(self element), for comparisons and predicates; `make_test` builds
// the test while the arguments are checked (it may throw).
aclnnStatus plan_predicate(const char* op, const aclTensor* self, aclTensor* out, uint64_t* workspace_size,
                           aclOpExecutor** executor, const std::function<std::function<bool(double)>()>& make_test) {
  return plan_operator(op, workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    const std::function<bool(double)> test = make_test();
    check_tensor(self, "self");
    check_tensor(out, "out");
    if (out->dtype != ACL_BOOL || out->view != self->view)
      throw Error(ACLNN_ERR_PARAM_INVALID, std::string(op) + ": out must be BOOL of self's shape");
    return [x = *self, y = *out, test](void*) {
      const Elements in(x), result(y);
      for (int64_t i = 0; i < result.count(); ++i) result.store(i, test(in.load(i)) ? 1 : 0);
    };
  });
}

double scalar_of(const aclScalar* scalar) {
  if (scalar == nullptr) throw Error(ACLNN_ERR_PARAM_NULLPTR, "other is NULL");
  return scalar->value;
}

}  // namespace

ASCEND_EMULATOR_C aclnnStatus aclnnGtScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                                            aclTensor* out, uint64_t* workspace_size,
                                                            aclOpExecutor** executor) {
  return plan_predicate("aclnnGtScalar", self, out, workspace_size, executor,
                        [&] { return [threshold = scalar_of(other)](double x) { return x > threshold; }; });
}
H2_EMULATED_RUN(aclnnGtScalar)

ASCEND_EMULATOR_C aclnnStatus aclnnEqScalarGetWorkspaceSize(const aclTensor* self, const aclScalar* other,
                                                            aclTensor* out, uint64_t* workspace_size,
                                                            aclOpExecutor** executor) {
  return plan_predicate("aclnnEqScalar", self, out, workspace_size, executor,
                        [&] { return [value = scalar_of(other)](double x) { return x == value; }; });
}
H2_EMULATED_RUN(aclnnEqScalar)

ASCEND_EMULATOR_C aclnnStatus aclnnIsFiniteGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                            uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_predicate("aclnnIsFinite", self, out, workspace_size, executor,
                        [] { return [](double x) { return std::isfinite(x); }; });
}
H2_EMULATED_RUN(aclnnIsFinite)

ASCEND_EMULATOR_C aclnnStatus aclnnLogicalNotGetWorkspaceSize(const aclTensor* self, aclTensor* out,
                                                              uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_predicate("aclnnLogicalNot", self, out, workspace_size, executor,
                        [] { return [](double x) { return x == 0; }; });
}
H2_EMULATED_RUN(aclnnLogicalNot)

ASCEND_EMULATOR_C aclnnStatus aclnnArangeGetWorkspaceSize(const aclScalar* start, const aclScalar* end,
                                                          const aclScalar* step, aclTensor* out,
                                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  return plan_operator("aclnnArange", workspace_size, executor, 0, [&]() -> std::function<void(void*)> {
    check_tensor(out, "out");
    if (start == nullptr || end == nullptr || step == nullptr)
      throw Error(ACLNN_ERR_PARAM_NULLPTR, "start, end or step is NULL");
    if (out->view.size() != 1) throw Error(ACLNN_ERR_PARAM_INVALID, "out must be 1-D");
    if (step->value == 0) throw Error(ACLNN_ERR_PARAM_INVALID, "step is 0");
    const double count = std::ceil((end->value - start->value) / step->value);
    if (count != static_cast<double>(out->view[0]))
      throw Error(ACLNN_ERR_PARAM_INVALID,
                  "out has " + std::to_string(out->view[0]) + " elements, the range " + std::to_string(count));
    return [y = *out, first = start->value, by = step->value](void*) {
      const Elements values(y);
      for (int64_t i = 0; i < values.count(); ++i) values.store(i, first + static_cast<double>(i) * by);
    };
  });
}
H2_EMULATED_RUN(aclnnArange)
