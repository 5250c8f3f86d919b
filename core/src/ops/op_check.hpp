// Validation of an operator call before it reaches a plugin, so a plugin never sees a malformed
// call and the user gets an error naming the operator and the argument. Each operator declares its
// tensors (inputs, outputs, which output may be an input) and states its shape rules; validate()
// then checks what is common to all: the plugin provides the operator, every tensor is on the
// stream's device, dtypes are ones the plugin declares, strides are ones it accepts, and no output
// overlaps another tensor or itself.
#pragma once

#include <boost/container/small_vector.hpp>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "../plugin_handle.hpp"
#include "h2/error.hpp"
#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::detail {

enum class TensorKind {
  floating,  // must be a dtype the plugin's capability lists
  index,     // I32 or I64
  mask,      // BOOL or U8
};

class OpCheck {
 public:
  // `op`'s name (the registry's) starts every message, or `name` where the call the user made has
  // another (rotary_backward is the rotary slot run inverse). `name` must outlive the check.
  OpCheck(Stream& stream, H2_Op op);
  OpCheck(Stream& stream, H2_Op op, const char* name);

  const char* name() const { return name_; }
  const Device& device() const { return stream_.device(); }
  const H2_OpTable& ops() const { return device().plugin()->ops(); }
  const H2_OpCapability& capability() const { return capability_; }

  // Declares tensors. `optional` ones may be undefined. An output may be exactly one of the inputs
  // named in `in_place` (the same view), never a partial overlap of anything.
  void input(const Tensor& t, const char* name, TensorKind kind = TensorKind::floating, bool optional = false);
  void output(const Tensor& t, const char* name, TensorKind kind = TensorKind::floating, bool optional = false,
              std::initializer_list<const char*> in_place = {});
  // A tensor that is read and written (optimizer state, scatter_add's y): may overlap nothing.
  void inout(const Tensor& t, const char* name, TensorKind kind = TensorKind::floating);

  // Throws h2::Error(INVALID_ARGUMENT) "NAME: message". Callers test first (`if (!ok) fail(...)`), so
  // no message is built on the success path, which every call takes.
  [[noreturn]] void fail(const std::string& message) const;
  // The same with H2_STATUS_UNSUPPORTED: the call is well formed but the plugin declares it cannot
  // take it (a dtype or strides outside its capability).
  [[noreturn]] void unsupported(const std::string& message) const;
  // "x is f32[4, 8]"
  static std::string is(const char* name, const Tensor& t) { return std::string(name) + " is " + t.describe(); }
  void require_shape(const Tensor& t, const char* name, const Shape& expected, const char* why) const;
  // "t is f32[2, 5] but the shape of x needs [2, 4]"
  void require_same_shape(const Tensor& t, const char* name, const Tensor& like, const char* like_name) const;
  void require_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const;
  void require_rank(const Tensor& t, const char* name, int rank) const;
  void require_rank_at_least(const Tensor& t, const char* name, int rank) const;
  // Saved statistics and losses (lse, mean, rstd, loss): f32, or f64 for full-precision checks.
  void require_statistic(const Tensor& t, const char* name) const;

  // Runs the common checks on every declared tensor.
  void validate() const;

  // Calls the plugin's slot with `args` and turns a failure into an h2::Error naming the operator.
  template <typename Args>
  void call(H2_Status (*slot)(H2_Stream*, const Args*), const Args& args) const {
    validate();
    device().plugin()->check(slot(stream_.native(), &args), name_);
  }

 private:
  struct Declared {
    const Tensor* tensor;
    const char* name;
    TensorKind kind;
    bool output;
    bool input;
    const char* in_place[2];  // inputs this output may be exactly (no operator allows more than two)
  };
  void declare(const Tensor& t, const char* name, TensorKind kind, bool optional, bool is_output, bool is_input,
               std::initializer_list<const char*> in_place);
  void check_overlap(const Declared& out, const Declared& other) const;

  Stream& stream_;
  const char* name_;
  H2_OpCapability capability_;
  // Most operators declare a handful of tensors: keep them off the heap (the checks run on every call).
  boost::container::small_vector<Declared, 12> tensors_;
};

// The slot of the stream's plugin, or an error naming plugin and operator when it has none.
template <typename Slot>
Slot op_slot(const OpCheck& check, Slot slot) {
  if (slot == nullptr)
    throw Error(H2_STATUS_UNSUPPORTED, std::string(check.name()) + ": plugin " + check.device().plugin_name() +
                                           " does not provide this operator");
  return slot;
}

// An argument struct, zeroed, with struct_size set.
template <typename Args>
Args make_args() {
  Args args;
  std::memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  return args;
}

// A tensor list for the ABI: descriptors of each tensor.
std::vector<H2_Tensor> descriptors(const std::vector<Tensor>& tensors);

}  // namespace h2::detail
