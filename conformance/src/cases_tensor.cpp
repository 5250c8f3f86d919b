// Elementwise arithmetic, reductions, copies and casts, factories and indexing; and the behaviour
// checks that are not numeric comparisons.
#include <chrono>
#include <functional>
#include <thread>

#include <tuple>

#include "cases.hpp"
#include "tolerance.hpp"

namespace h2::conformance {

namespace {

// The names the tolerance table knows these operations by.
const char* variant_name(ops::BinaryOp op) {
  switch (op) {
    case ops::BinaryOp::add: return "add";
    case ops::BinaryOp::sub: return "sub";
    case ops::BinaryOp::mul: return "mul";
    case ops::BinaryOp::div: return "div";
    case ops::BinaryOp::pow: return "pow";
    case ops::BinaryOp::maximum: return "maximum";
    case ops::BinaryOp::minimum: return "minimum";
  }
  return "";
}

const char* variant_name(ops::UnaryOp op) {
  switch (op) {
    case ops::UnaryOp::exp: return "exp";
    case ops::UnaryOp::log: return "log";
    case ops::UnaryOp::sqrt: return "sqrt";
    case ops::UnaryOp::rsqrt: return "rsqrt";
    case ops::UnaryOp::neg: return "neg";
    case ops::UnaryOp::reciprocal: return "reciprocal";
  }
  return "";
}

const char* variant_name(ops::ReduceOp op) {
  switch (op) {
    case ops::ReduceOp::sum: return "sum";
    case ops::ReduceOp::mean: return "mean";
    case ops::ReduceOp::max: return "max";
    case ops::ReduceOp::amax: return "amax";
  }
  return "";
}

Case binary_case(std::string name, DType dtype, ops::BinaryOp op, Shape a, Shape b, Shape y, Fill fill = Fill::normal,
                 Layout layout = Layout::contiguous) {
  Case x{.op = "binary", .name = std::move(name), .dtype = dtype};
  const bool power = op == ops::BinaryOp::pow;
  x.tensors = {{.name = "a", .shape = a, .fill = power ? Fill::positive : fill, .layout = layout},
               {.name = "b", .shape = b, .fill = power ? Fill::uniform : fill, .scale = power ? 3.0 : 1.0},
               {.name = "y", .shape = y, .role = Role::output}};
  x.run = [op](Stream& s, const std::vector<Tensor>& t) { ops::binary(s, op, t[0], t[1], t[2]); };
  x.variant = variant_name(op);
  return x;
}

Case scalar_case(std::string name, DType dtype, ops::BinaryOp op, double scalar, bool scalar_first) {
  Case x{.op = "binary_scalar", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = {9, 14}, .fill = op == ops::BinaryOp::pow ? Fill::positive : Fill::normal},
               {.name = "y", .shape = {9, 14}, .role = Role::output}};
  x.run = [op, scalar, scalar_first](Stream& s, const std::vector<Tensor>& t) {
    if (scalar_first) {
      ops::binary(s, op, scalar, t[0], t[1]);
    } else {
      ops::binary(s, op, t[0], scalar, t[1]);
    }
  };
  x.variant = variant_name(op);
  return x;
}

Case unary_case(std::string name, DType dtype, ops::UnaryOp op, Fill fill) {
  Case x{.op = "unary", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = {17, 23}, .fill = fill, .layout = Layout::transposed},
               {.name = "y", .shape = {17, 23}, .role = Role::output}};
  x.run = [op](Stream& s, const std::vector<Tensor>& t) { ops::unary(s, op, t[0], t[1]); };
  x.variant = variant_name(op);
  return x;
}

Case reduce_case(std::string name, DType dtype, ops::ReduceOp op, Shape x_shape, std::vector<int> dims, bool keepdim,
                 bool f32_out, bool indices, Layout layout = Layout::contiguous) {
  Shape y;
  int64_t count = 1;
  for (int d = 0; d < static_cast<int>(x_shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (reduced) count *= x_shape[static_cast<size_t>(d)];
    if (!reduced) y.push_back(x_shape[static_cast<size_t>(d)]);
    if (reduced && keepdim) y.push_back(1);
  }
  Case x{.op = "reduce", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x", .shape = x_shape, .layout = layout},
               {.name = "y", .shape = y, .role = Role::output, .kind = f32_out ? Kind::statistic : Kind::floating}};
  if (indices) x.tensors.push_back({.name = "indices", .shape = y, .role = Role::output, .kind = Kind::index});
  x.run = [op, dims, keepdim, indices](Stream& s, const std::vector<Tensor>& t) {
    ops::reduce(s, op, t[0], dims, t[1], keepdim, indices ? t[2] : Tensor());
  };
  x.n = count;
  x.variant = variant_name(op);
  return x;
}

Case copy_case(std::string name, DType dtype, Shape shape, Layout in_layout, Layout out_layout, bool cast_from_f32,
               double magnitude = 100, Fill fill = Fill::normal) {
  Case x{.op = "copy", .name = std::move(name), .dtype = dtype};
  x.tensors = {{.name = "x",
                .shape = shape,
                .kind = cast_from_f32 ? Kind::fixed : Kind::floating,
                .fill = fill,
                .scale = magnitude,
                .fixed_dtype = DType::f32,
                .layout = in_layout},
               {.name = "y", .shape = shape, .role = Role::output, .layout = out_layout}};
  x.run = [](Stream& s, const std::vector<Tensor>& t) { ops::copy(s, t[0], t[1]); };
  return x;
}

// Whether `other` sees the whole of a long memset on `s` once `order` says it is done: an event
// recorded behind it and waited on, or `s` reporting ready. The memset runs for a while, so
// "done" meaning "started" rather than "finished" shows as its last bytes not yet written (on a
// device fast enough to have finished it, the check holds anyway). Three trials, each a new value.
std::string read_after_long_memset(Stream& s, const std::function<std::string(Stream& busy, Stream& other)>& order,
                                   const std::string& failure) {
  const Device& d = s.device();
  Stream other = d.create_stream();
  const size_t bytes = size_t{128} << 20;
  DeviceBuffer big = d.allocate(bytes), seen = d.allocate(4);
  for (uint8_t trial = 1; trial <= 3; ++trial) {
    s.memset(big, trial);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // under way, no longer queued
    if (std::string problem = order(s, other); !problem.empty()) return problem;
    other.copy(seen, 0, big, bytes - 4, 4);  // the last bytes the memset writes
    uint8_t host[4] = {};
    other.copy_to_host(host, seen, 4);
    other.synchronize();
    if (host[0] != trial || host[3] != trial) return failure + " (trial " + std::to_string(trial) + ")";
  }
  s.synchronize();
  return "";
}

}  // namespace

void add_tensor_cases(CaseList& list, const Sizes& s, DType dtype) {
  auto& cases = list.cases;
  const int64_t t = s.tokens(), h = s.hidden;
  using B = ops::BinaryOp;
  cases.push_back(binary_case("add residual " + shape_name({t, h}), dtype, B::add, {t, h}, {t, h}, {t, h}));
  cases.push_back(binary_case("sub broadcast rows", dtype, B::sub, {6, 1}, {5}, {6, 5}));
  cases.push_back(binary_case("mul bias broadcast, strided a", dtype, B::mul, {t, 16}, {16}, {t, 16}, Fill::normal,
                              Layout::strided));
  cases.push_back(binary_case("div", dtype, B::div, {8, 8}, {8, 8}, {8, 8}, Fill::positive));
  cases.push_back(binary_case("add NaN and infinities", dtype, B::add, {64}, {64}, {64}, Fill::special));
  cases.push_back(binary_case("pow", dtype, B::pow, {5, 7}, {5, 7}, {5, 7}));
  cases.push_back(binary_case("maximum with NaN", dtype, B::maximum, {64}, {64}, {64}, Fill::special));
  cases.push_back(binary_case("minimum broadcast both", dtype, B::minimum, {4, 1, 3}, {1, 5, 3}, {4, 5, 3}));
  cases.push_back(binary_case("empty", dtype, B::add, {0, 3}, {3}, {0, 3}));
  // The largest rank the ABI allows, broadcasting in every other dimension.
  cases.push_back(binary_case("rank 8", dtype, B::add, {2, 1, 3, 1, 2, 1, 2, 3}, {1, 2, 1, 2, 1, 3, 2, 1},
                              {2, 2, 3, 2, 2, 3, 2, 3}));
  // Long enough that a device splits it into several pieces (several threads, blocks or tiles).
  cases.push_back(binary_case("mul of 600,000 elements", dtype, B::mul, {600'000}, {600'000}, {600'000}));
  cases.push_back(scalar_case("x * 0.125", dtype, B::mul, 0.125, false));
  cases.push_back(scalar_case("1 - x", dtype, B::sub, 1.0, true));
  cases.push_back(scalar_case("2 / x", dtype, B::div, 2.0, true));
  cases.push_back(scalar_case("x ^ 1.5", dtype, B::pow, 1.5, false));
  cases.push_back(scalar_case("relu: maximum(x, 0)", dtype, B::maximum, 0.0, false));
  cases.push_back(scalar_case("clamp: minimum(0.5, x)", dtype, B::minimum, 0.5, true));
  using U = ops::UnaryOp;
  cases.push_back(unary_case("exp", dtype, U::exp, Fill::normal));
  cases.push_back(unary_case("log", dtype, U::log, Fill::positive));
  cases.push_back(unary_case("sqrt", dtype, U::sqrt, Fill::positive));
  cases.push_back(unary_case("rsqrt", dtype, U::rsqrt, Fill::positive));
  cases.push_back(unary_case("neg with NaN and infinities", dtype, U::neg, Fill::special));
  cases.push_back(unary_case("reciprocal", dtype, U::reciprocal, Fill::positive));
  {
    Case sub = unary_case("neg keeps subnormals", dtype, U::neg, Fill::subnormal);
    sub.tensors[0].scale = smallest_normal(dtype);
    cases.push_back(sub);
  }
  {
    Case x{.op = "where", .name = "broadcast condition", .dtype = dtype};
    x.tensors = {{.name = "cond", .shape = {1, 11}, .kind = Kind::mask, .fill = Fill::mask},
                 {.name = "a", .shape = {6, 11}},
                 {.name = "b", .shape = {6, 11}, .fill = Fill::special},
                 {.name = "y", .shape = {6, 11}, .role = Role::output}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::where(st, v[0], v[1], v[2], v[3]); };
    cases.push_back(x);
  }
  {
    Case x{.op = "masked_fill", .name = "causal mask with -inf", .dtype = dtype};
    x.tensors = {{.name = "x", .shape = {s.seq, s.seq}},
                 {.name = "mask", .shape = {s.seq, s.seq}, .kind = Kind::mask, .fill = Fill::mask},
                 {.name = "y", .shape = {s.seq, s.seq}, .role = Role::output}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) {
      ops::masked_fill(st, v[0], v[1], -std::numeric_limits<double>::infinity(), v[2]);
    };
    cases.push_back(x);
  }

  using R = ops::ReduceOp;
  cases.push_back(reduce_case("sum over rows to f32 (bias gradient) " + shape_name({t, h}), dtype, R::sum, {t, h}, {0},
                              false, true, false));
  cases.push_back(reduce_case("sum over " + std::to_string(s.long_k) + " elements", dtype, R::sum, {2, s.long_k}, {1},
                              false, false, false));
  cases.push_back(
      reduce_case("mean over the last two, keepdim", dtype, R::mean, {3, 4, 5}, {1, 2}, true, false, false));
  cases.push_back(reduce_case("max with indices", dtype, R::max, {7, 19}, {1}, false, false, true));
  cases.push_back(reduce_case("amax of everything", dtype, R::amax, {6, 9}, {0, 1}, false, false, false));
  cases.push_back(reduce_case("sum over an empty dimension", dtype, R::sum, {4, 0}, {1}, false, false, false));
  cases.push_back(reduce_case("mean over a size-1 dimension", dtype, R::mean, {5, 1}, {1}, false, false, false));
  cases.push_back(reduce_case("sum over the middle of three", dtype, R::sum, {3, 4, 5}, {1}, false, false, false));
  // Subnormal inputs count: flushed to zero, 4096 of them sum to 0 instead of a normal number.
  {
    Case sub = reduce_case("sum of 4096 subnormals", dtype, R::sum, {3, 4096}, {1}, false, false, false);
    sub.tensors[0].fill = Fill::subnormal;
    sub.tensors[0].scale = smallest_normal(dtype);
    cases.push_back(sub);
  }
  // Views: reductions read through strides like every other operator.
  cases.push_back(
      reduce_case("sum of a transposed view", dtype, R::sum, {24, 40}, {1}, false, false, false, Layout::transposed));
  cases.push_back(reduce_case("max with indices of a strided view", dtype, R::max, {9, 33}, {1}, false, false, true,
                              Layout::strided));
  cases.push_back(
      reduce_case("mean of an unaligned view", dtype, R::mean, {5, 17}, {0}, false, false, false, Layout::offset));

  cases.push_back(copy_case("transpose to contiguous", dtype, {t, 24}, Layout::transposed, Layout::contiguous, false));
  cases.push_back(copy_case("into a strided view", dtype, {9, 10}, Layout::contiguous, Layout::strided, false));
  cases.push_back(copy_case("unaligned to unaligned", dtype, {257}, Layout::offset, Layout::offset, false));
  cases.push_back(copy_case("one element", dtype, {1}, Layout::contiguous, Layout::contiguous, false));
  cases.push_back(
      copy_case("rank 8, transposed", dtype, {2, 1, 3, 2, 1, 2, 3, 2}, Layout::transposed, Layout::contiguous, false));
  // Integers: copied as integers (int64 beyond 2^53 too), and casts from floats, which truncate
  // toward zero, saturate at the integer's range and map NaN to 0.
  for (const auto& [name, kind, layout] : {std::tuple{"int64 into an unaligned view", Kind::index, Layout::offset},
                                           std::tuple{"int64 to int32, strided", Kind::index32, Layout::strided}}) {
    Case x{.op = "copy", .name = name, .dtype = dtype};
    x.tensors = {{.name = "x", .shape = {6, 7}, .kind = Kind::index, .fill = Fill::indices, .limit = int64_t{1} << 60},
                 {.name = "y", .shape = {6, 7}, .role = Role::output, .kind = kind, .layout = layout}};
    if (kind == Kind::index32) x.tensors[0].limit = 1 << 30;
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::copy(st, v[0], v[1]); };
    cases.push_back(x);
  }
  for (const auto& [name, kind] : {std::pair{"to int64: truncate, saturate, NaN to 0", Kind::index},
                                   std::pair{"to int32: truncate, saturate, NaN to 0", Kind::index32}}) {
    Case x{.op = "copy", .name = name, .dtype = dtype};
    x.tensors = {{.name = "x", .shape = {96}, .fill = Fill::cast_edges, .scale = 1000},
                 {.name = "y", .shape = {96}, .role = Role::output, .kind = kind, .layout = Layout::offset}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::copy(st, v[0], v[1]); };
    cases.push_back(x);
  }
  if (dtype != DType::f32) {
    cases.push_back(
        copy_case("cast from f32, round to nearest even", dtype, {4096}, Layout::contiguous, Layout::contiguous, true));
    // Values past the dtype's largest finite number round to +-Inf, not saturate: f16's is 65504,
    // bf16's about 3.39e38 (f32's own largest, 3.40e38, lies beyond it).
    const double beyond = dtype == DType::f16 ? 1e5 : 3.4e38;
    cases.push_back(copy_case("cast from f32 past the largest finite value", dtype, {1024}, Layout::contiguous,
                              Layout::contiguous, true, beyond, Fill::uniform));
    // Into the dtype's subnormal range: rounded to the nearest subnormal, not flushed to zero.
    cases.push_back(copy_case("cast from f32 into the subnormal range", dtype, {1024}, Layout::contiguous,
                              Layout::contiguous, true, smallest_normal(dtype), Fill::subnormal));
  }
  {
    Case x{.op = "fill", .name = "one third", .dtype = dtype};
    x.tensors = {{.name = "y", .shape = {5, 6}, .role = Role::output, .layout = Layout::strided}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::fill(st, v[0], 1.0 / 3); };
    cases.push_back(x);
    Case a{.op = "arange", .name = "-3 by 0.5", .dtype = dtype};
    a.tensors = {{.name = "y", .shape = {40}, .role = Role::output}};
    a.run = [](Stream& st, const std::vector<Tensor>& v) { ops::arange(st, v[0], -3, 0.5); };
    cases.push_back(a);
    // start + i * step with neither exact in a float: computed in fp64 and rounded once.
    Case inexact{.op = "arange", .name = "0.1 by 0.3", .dtype = dtype};
    inexact.tensors = {{.name = "y", .shape = {300}, .role = Role::output}};
    inexact.run = [](Stream& st, const std::vector<Tensor>& v) { ops::arange(st, v[0], 0.1, 0.3); };
    cases.push_back(inexact);
  }
  {
    Case x{.op = "index_select", .name = "rows of " + shape_name({s.vocab, 8}), .dtype = dtype};
    x.tensors = {{.name = "x", .shape = {s.vocab, 8}},
                 {.name = "indices", .shape = {t}, .kind = Kind::index, .fill = Fill::indices, .limit = s.vocab},
                 {.name = "y", .shape = {t, 8}, .role = Role::output}};
    x.run = [](Stream& st, const std::vector<Tensor>& v) { ops::index_select(st, v[0], 0, v[1], v[2]); };
    cases.push_back(x);
    Case g{.op = "gather", .name = "along the last dimension", .dtype = dtype};
    g.tensors = {{.name = "x", .shape = {t, 16}},
                 {.name = "indices", .shape = {t, 3}, .kind = Kind::index32, .fill = Fill::indices, .limit = 16},
                 {.name = "y", .shape = {t, 3}, .role = Role::output}};
    g.run = [](Stream& st, const std::vector<Tensor>& v) { ops::gather(st, v[0], 1, v[1], v[2]); };
    cases.push_back(g);
    Case sa{.op = "scatter_add", .name = "collisions along dimension 0", .dtype = dtype};
    sa.tensors = {{.name = "y", .shape = {5, 6}, .role = Role::inout},
                  {.name = "indices", .shape = {12, 6}, .kind = Kind::index, .fill = Fill::indices, .limit = 5},
                  {.name = "src", .shape = {12, 6}}};
    sa.run = [](Stream& st, const std::vector<Tensor>& v) { ops::scatter_add(st, v[0], 0, v[1], v[2]); };
    sa.n = 13;
    cases.push_back(sa);
    Case along_1 = sa;
    along_1.name = "collisions along dimension 1";
    along_1.tensors = {{.name = "y", .shape = {4, 5}, .role = Role::inout},
                       {.name = "indices", .shape = {4, 9}, .kind = Kind::index, .fill = Fill::indices, .limit = 5},
                       {.name = "src", .shape = {4, 9}}};
    along_1.run = [](Stream& st, const std::vector<Tensor>& v) { ops::scatter_add(st, v[0], 1, v[1], v[2]); };
    along_1.n = 10;
    cases.push_back(along_1);
  }
}

void add_behaviour_checks(CaseList& list) {
  list.behaviours.push_back(
      {"errors", "an index out of range is reported, not ignored", [](Stream& s) -> std::string {
         const Device& d = s.device();
         Tensor w = Tensor::empty(d, {4, 2}, DType::f32), y = Tensor::empty(d, {1, 2}, DType::f32);
         Tensor ids = Tensor::from_host(s, std::vector<double>{9}, {1}, DType::i64);
         ops::fill(s, w, 1.0);
         try {
           ops::embedding(s, w, ids, y);
           s.synchronize();
         } catch (const Error& e) {
           if (e.status() == H2_STATUS_UNSUPPORTED) throw;  // no embedding here: the check cannot judge
           return "";
         }
         return "embedding with index 9 of 4 rows completed without an error";
       }});
  list.behaviours.push_back({"errors", "freeing memory twice is an error, not a crash", [](Stream& s) -> std::string {
                               const H2_PluginApi& api = s.device().plugin_api();
                               void* p = nullptr;
                               if (api.mem_alloc(s.device().index(), 256, &p) != H2_STATUS_OK)
                                 return "mem_alloc of 256 bytes failed";
                               if (api.mem_free(s.device().index(), p) != H2_STATUS_OK) return "mem_free failed";
                               if (api.mem_free(s.device().index(), p) == H2_STATUS_OK)
                                 return "a second mem_free of the same pointer reported success";
                               return "";
                             }});
  list.behaviours.push_back(
      {"errors", "an allocation beyond the device's memory fails cleanly", [](Stream& s) -> std::string {
         const uint64_t total = s.device().properties().total_memory_bytes;
         try {
           DeviceBuffer b = s.device().allocate(static_cast<size_t>(total) + (size_t{1} << 30));
           return "allocating more than the device's total memory succeeded";
         } catch (const Error& e) {
           if (e.status() != H2_STATUS_OUT_OF_MEMORY) return std::string("expected out of memory, got: ") + e.what();
         }
         return "";
       }});
  // H2_STREAM_HOST_INLINE is a hint: whether the plugin runs the work inline or ignores the flag,
  // order and events must hold as on any stream (DiComm creates its streams this way).
  list.behaviours.push_back(
      {"streams", "a host-inline stream keeps stream order and events", [](Stream& s) -> std::string {
         const Device& d = s.device();
         Stream inline_stream = d.create_stream({.host_inline = true});
         DeviceBuffer big = d.allocate(size_t{32} << 20), flag = d.allocate(4), seen = d.allocate(4);
         s.memset(flag, 0);
         s.memset(big, 1);
         s.memset(flag, 7);
         Event produced = d.create_event();
         produced.record(s);
         inline_stream.wait(produced);
         inline_stream.copy(seen, 0, flag, 0, 4);
         inline_stream.memset(flag, 9);
         Event consumed = d.create_event();
         consumed.record(inline_stream);
         s.wait(consumed);
         uint8_t host[8] = {};
         s.copy_to_host(host, seen, 4);
         s.copy_to_host(host + 4, flag, 4);
         s.synchronize();
         if (host[0] != 7) return "a host-inline stream waiting on an event read data written before the event";
         if (host[4] != 9) return "a stream waiting on a host-inline stream's event missed its work";
         return "";
       }});
  list.behaviours.push_back({"streams", "an event orders work across two streams", [](Stream& s) -> std::string {
                               const Device& d = s.device();
                               Stream other = d.create_stream();
                               DeviceBuffer big = d.allocate(size_t{32} << 20), flag = d.allocate(4),
                                            seen = d.allocate(4);
                               s.memset(flag, 0);
                               s.memset(big, 1);
                               s.memset(flag, 7);
                               Event done = d.create_event();
                               done.record(s);
                               other.wait(done);
                               other.copy(seen, 0, flag, 0, 4);
                               uint8_t host[4] = {};
                               other.copy_to_host(host, seen, 4);
                               other.synchronize();
                               return host[0] == 7 ? ""
                                                   : "a stream waiting on an event read data written before the event";
                             }});
  list.behaviours.push_back(
      {"streams", "an event completes when its work has finished, not when it started", [](Stream& s) -> std::string {
         return read_after_long_memset(
             s,
             [](Stream& busy, Stream& other) -> std::string {
               Event done = busy.device().create_event();
               done.record(busy);
               other.wait(done);
               return "";
             },
             "a stream waiting on an event read memory that the work before the event had not finished writing");
       }});
  list.behaviours.push_back(
      {"streams", "a stream is ready when its work has finished, not when it started", [](Stream& s) -> std::string {
         return read_after_long_memset(
             s,
             [](Stream& busy, Stream&) -> std::string {
               const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
               while (!busy.ready()) {
                 if (std::chrono::steady_clock::now() > give_up) return "a 128 MiB memset was not ready after 30 s";
                 std::this_thread::yield();
               }
               return "";  // no wait on `other`: the query said the memset is done
             },
             "a stream reported ready while its memset was still writing");
       }});
}

}  // namespace h2::conformance
