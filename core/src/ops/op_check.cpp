#include "op_check.hpp"

#include <algorithm>
#include <numeric>

#include "h2/op_registry.hpp"

namespace h2::detail {

namespace {

std::string dtype_list(uint64_t mask) {
  std::string text;
  for (DType dtype : kAllDTypes)
    if (mask & (uint64_t{1} << static_cast<uint32_t>(dtype)))
      text += (text.empty() ? "" : ", ") + std::string(dtype_name(dtype));
  return text.empty() ? "none" : text;
}

// Byte range [first, last] of a non-empty view inside its storage.
struct Range {
  int64_t first, last;
};
Range byte_range(const Tensor& t) {
  const auto element = static_cast<int64_t>(dtype_size(t.dtype()));
  int64_t extent = 0;
  for (int d = 0; d < t.rank(); ++d)
    extent += (t.shape()[static_cast<size_t>(d)] - 1) * t.strides()[static_cast<size_t>(d)];
  return {t.offset() * element, (t.offset() + extent) * element + element - 1};
}

// Dimensions of size > 1 ordered by stride, for the overlap tests.
using Dims = boost::container::small_vector<std::pair<int64_t, int64_t>, H2_MAX_RANK>;  // (stride, size)
Dims sorted_dims(const Tensor& t) {
  Dims dims;
  for (int d = 0; d < t.rank(); ++d)
    if (t.shape()[static_cast<size_t>(d)] > 1)
      dims.emplace_back(t.strides()[static_cast<size_t>(d)], t.shape()[static_cast<size_t>(d)]);
  std::sort(dims.begin(), dims.end());
  return dims;
}

// True when no two indices of `t` address one element: each stride reaches past everything the
// smaller strides can span (a sufficient test, exact for every layout views produce).
bool non_overlapping(const Tensor& t) {
  int64_t span = 0;  // the largest offset reachable with the dimensions seen so far
  for (auto [stride, size] : sorted_dims(t)) {
    if (stride <= span) return false;
    span += (size - 1) * stride;
  }
  return true;
}

// For two views with the same strides and shape that are each non-overlapping: do they share an
// element? Their offsets differ by delta; they share one iff delta = sum c_d * stride_d with
// |c_d| < size_d. The strides nest (each exceeds what the smaller ones span), so at each dimension,
// largest first, c_d is floor(delta / stride) or one more; try both.
bool representable(int64_t delta, const Dims& dims, size_t count) {
  if (count == 0) return delta == 0;
  const auto [stride, size] = dims[count - 1];
  const int64_t low = delta >= 0 ? delta / stride : -((-delta + stride - 1) / stride);  // floor
  for (int64_t c = low; c <= low + 1; ++c)
    if (std::abs(c) < size && representable(delta - c * stride, dims, count - 1)) return true;
  return false;
}

bool same_layout_views_intersect(const Tensor& a, const Tensor& b) {
  const auto dims = sorted_dims(a);
  return representable(b.offset() - a.offset(), dims, dims.size());
}

}  // namespace

std::vector<H2_Tensor> descriptors(const std::vector<Tensor>& tensors) {
  std::vector<H2_Tensor> out;
  out.reserve(tensors.size());
  for (const Tensor& t : tensors) out.push_back(t.descriptor());
  return out;
}

// The registry's names are string literals, so name_ may point into them.
OpCheck::OpCheck(Stream& stream, H2_Op op) : OpCheck(stream, op, op_name(op).data()) {}

OpCheck::OpCheck(Stream& stream, H2_Op op, const char* name) : stream_(stream), name_(name) {
  capability_ = stream.device().plugin()->capability(stream.device().index(), op);
  if (capability_.struct_size == 0)
    throw Error(H2_STATUS_UNSUPPORTED,
                std::string(name_) + ": plugin " + stream.device().plugin_name() + " does not provide this operator");
}

void OpCheck::unsupported(const std::string& message) const {
  throw Error(H2_STATUS_UNSUPPORTED, std::string(name_) + ": " + message);
}

void OpCheck::fail(const std::string& message) const {
  throw Error(H2_STATUS_INVALID_ARGUMENT, std::string(name_) + ": " + message);
}

void OpCheck::declare(const Tensor& t, const char* name, TensorKind kind, bool optional, bool is_output, bool is_input,
                      std::initializer_list<const char*> in_place) {
  if (!t.defined()) {
    if (!optional) fail(std::string(name) + " is required but undefined");
    return;
  }
  Declared declared{&t, name, kind, is_output, is_input, {nullptr, nullptr}};
  if (in_place.size() > 2) throw Error(H2_STATUS_INTERNAL, std::string(name_) + ": more than two in-place inputs");
  std::copy(in_place.begin(), in_place.end(), declared.in_place);
  tensors_.push_back(declared);
}

void OpCheck::input(const Tensor& t, const char* name, TensorKind kind, bool optional) {
  declare(t, name, kind, optional, false, true, {});
}

void OpCheck::output(const Tensor& t, const char* name, TensorKind kind, bool optional,
                     std::initializer_list<const char*> in_place) {
  declare(t, name, kind, optional, true, false, in_place);
}

void OpCheck::inout(const Tensor& t, const char* name, TensorKind kind) {
  declare(t, name, kind, false, true, true, {});
}

void OpCheck::require_shape(const Tensor& t, const char* name, const Shape& expected, const char* why) const {
  if (t.shape() != expected) fail(is(name, t) + " but " + why + " needs " + shape_string(expected));
}

void OpCheck::require_same_shape(const Tensor& t, const char* name, const Tensor& like, const char* like_name) const {
  if (t.shape() != like.shape())
    fail(is(name, t) + " but the shape of " + like_name + " needs " + shape_string(like.shape()));
}

void OpCheck::require_same_dtype(const Tensor& a, const char* a_name, const Tensor& b, const char* b_name) const {
  if (a.dtype() != b.dtype()) fail(is(a_name, a) + " but " + is(b_name, b) + ": the dtypes differ");
}

void OpCheck::require_rank(const Tensor& t, const char* name, int rank) const {
  if (t.rank() != rank) fail(is(name, t) + " but must have " + std::to_string(rank) + " dimensions");
}

void OpCheck::require_rank_at_least(const Tensor& t, const char* name, int rank) const {
  if (t.rank() < rank) fail(is(name, t) + " but needs at least " + std::to_string(rank) + " dimensions");
}

void OpCheck::require_statistic(const Tensor& t, const char* name) const {
  if (t.dtype() != DType::f32 && t.dtype() != DType::f64) fail(is(name, t) + " but statistics are f32 (or f64)");
}

void OpCheck::check_overlap(const Declared& out, const Declared& other) const {
  const Tensor& a = *out.tensor;
  const Tensor& b = *other.tensor;
  if (a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return;
  const Range ra = byte_range(a), rb = byte_range(b);
  if (ra.last < rb.first || rb.last < ra.first) return;  // disjoint ranges
  if (a.same_view(b)) {
    const bool allowed = std::any_of(std::begin(out.in_place), std::end(out.in_place),
                                     [&](const char* n) { return n != nullptr && std::strcmp(n, other.name) == 0; });
    if (allowed && !other.output) return;
    fail(std::string(out.name) + " is the same memory as " + other.name +
         (allowed ? "" : "; this operator cannot write it in place"));
  }
  const bool decidable =
      a.strides() == b.strides() && a.shape() == b.shape() && a.dtype() == b.dtype() && non_overlapping(a);
  if (decidable && !same_layout_views_intersect(a, b)) return;  // interleaved but disjoint, e.g. column halves
  if (decidable || (non_overlapping(a) && non_overlapping(b) &&
                    ra.last - ra.first + 1 == a.numel() * static_cast<int64_t>(dtype_size(a.dtype())) &&
                    rb.last - rb.first + 1 == b.numel() * static_cast<int64_t>(dtype_size(b.dtype()))))
    fail(std::string(out.name) + " overlaps " + other.name + " (" + out.name + " is " + a.describe() + ", " +
         other.name + " is " + b.describe() + " in the same buffer)");
  // Strided views whose overlap cannot be decided cheaply are let through, as PyTorch does.
}

void OpCheck::validate() const {
  const Device& device = stream_.device();
  for (const Declared& d : tensors_) {
    const Tensor& t = *d.tensor;
    if (!(t.device() == device))
      fail(is(d.name, t) + " on " + t.device().label() + " but the stream is on " + device.label());
    switch (d.kind) {
      case TensorKind::floating:
        if (!(capability_.dtypes & (uint64_t{1} << static_cast<uint32_t>(t.dtype()))))
          unsupported(is(d.name, t) + " but plugin " + device.plugin_name() + " supports " +
                      dtype_list(capability_.dtypes) + " for this operator");
        break;
      case TensorKind::index:
        if (t.dtype() != DType::i32 && t.dtype() != DType::i64) fail(is(d.name, t) + " but must be i32 or i64");
        break;
      case TensorKind::mask:
        if (t.dtype() != DType::boolean && t.dtype() != DType::u8) fail(is(d.name, t) + " but must be bool or u8");
        break;
    }
    if (!capability_.strided_tensors && !t.is_contiguous())
      unsupported(std::string(d.name) + " is not contiguous and plugin " + device.plugin_name() +
                  " needs contiguous tensors for this operator; make it contiguous with ops::copy");
    if (d.output && !t.is_contiguous() && t.numel() > 0 && !non_overlapping(t))
      fail(std::string(d.name) +
           " has overlapping elements (a stride of 0 or strides that overlap); write into a "
           "tensor of its own");
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!tensors_[i].output) continue;
    for (size_t j = 0; j < tensors_.size(); ++j)
      if (i != j && (tensors_[j].input || j > i)) check_overlap(tensors_[i], tensors_[j]);
  }
}

}  // namespace h2::detail
