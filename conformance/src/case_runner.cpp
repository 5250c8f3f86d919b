#include "case_runner.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "h2/half.hpp"
#include "tolerance.hpp"

namespace h2::conformance {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kOutputSentinel = -4608;  // exact in every dtype: marks memory an operator must not write
constexpr int64_t kIndexSentinel = -1;
// Around integer outputs: no zero byte, so a stray byte written past an element shows.
constexpr double kIntegerOutputSentinel = -1234567;

enum class Run { plugin, reference_same_dtype, exact };

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

DType dtype_in(const TensorSpec& spec, DType case_dtype, Run run) {
  const bool exact = run == Run::exact;
  switch (spec.kind) {
    case Kind::floating: return exact ? DType::f64 : case_dtype;
    case Kind::statistic:
    case Kind::master: return exact ? DType::f64 : DType::f32;
    case Kind::index: return DType::i64;
    case Kind::index32: return DType::i32;
    case Kind::mask: return DType::boolean;
    case Kind::fixed: return spec.fixed_dtype;
  }
  return case_dtype;
}

// The value `v` becomes when stored in `dtype` (so every run sees identical inputs).
double representable(double v, DType dtype) {
  switch (dtype) {
    case DType::f32: return static_cast<float>(v);
    case DType::f16: return f16_to_f32(f32_to_f16(static_cast<float>(v)));
    case DType::bf16: return bf16_to_f32(f32_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

uint32_t seed_of(const Case& c, const TensorSpec& spec) {
  return static_cast<uint32_t>(
      std::hash<std::string>{}(c.op + "|" + c.name + "|" + spec.name + "|" + std::string(dtype_name(c.dtype))));
}

// Elements drawn from one generator. Full-size inputs hold hundreds of millions of elements, so
// chunks are drawn on every core; the first chunk's generator is seeded as the whole tensor's once
// was, so tensors of up to one chunk (every quick case's but a few) keep their values.
constexpr size_t kChunk = size_t{1} << 16;

// Runs body(k) for k in [0, count) on all cores.
void for_each_chunk(size_t count, const std::function<void(size_t)>& body) {
  const size_t threads = std::min<size_t>(count, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::jthread> workers;
  for (size_t t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (size_t k = t; k < count; k += threads) body(k);
    });
  for (size_t k = 0; k < count; k += threads) body(k);
}

// The spec's values, as `dtype` holds them (so every run sees identical inputs).
HostValues generate(const Case& c, const TensorSpec& spec, DType dtype) {
  HostValues v(static_cast<size_t>(shape_numel(spec.shape)));
  const uint32_t seed = seed_of(c, spec);
  for_each_chunk((v.size() + kChunk - 1) / kChunk, [&](size_t k) {
    std::seed_seq chunk_seed{seed, static_cast<uint32_t>(k)};
    std::mt19937 gen = k == 0 ? std::mt19937(seed) : std::mt19937(chunk_seed);
    std::normal_distribution<double> normal(0, 1);
    std::uniform_real_distribution<double> unit(0, 1);
    for (size_t i = k * kChunk; i < std::min(v.size(), (k + 1) * kChunk); ++i) {
      switch (spec.fill) {
        case Fill::normal: v[i] = normal(gen) * spec.scale; break;
        case Fill::positive: v[i] = (0.5 + 1.5 * unit(gen)) * spec.scale; break;
        case Fill::uniform: v[i] = (2 * unit(gen) - 1) * spec.scale; break;
        case Fill::indices:
          v[i] = std::floor(unit(gen) * static_cast<double>(spec.limit));
          // Both ends of the range, which chance would rarely draw: a bound checked one off shows.
          if (i == 1) v[i] = 0;
          if (i == 2) v[i] = static_cast<double>(spec.limit - 1);
          if (spec.every_third && i % 3 == 0) v[i] = static_cast<double>(*spec.every_third);
          break;
        case Fill::mask: v[i] = unit(gen) < 0.5 ? 1 : 0; break;
        case Fill::zeros:
        case Fill::derived: v[i] = 0; break;
        case Fill::sparse_special: {
          static const double specials[] = {kNaN, INFINITY, -INFINITY};
          v[i] = i % 211 == 17 ? specials[(i / 211) % 3] : normal(gen) * spec.scale;
          break;
        }
        case Fill::subnormal:
          v[i] = std::ldexp(0.5 + 0.5 * unit(gen), -static_cast<int>(10 * unit(gen))) * spec.scale;
          break;
        case Fill::cast_edges: {
          static const double edges[] = {kNaN,    INFINITY, -INFINITY, 0x1p63,       -0x1p63, 0x1p31,
                                         -0x1p31, 0.75,     -0.75,     -1.9999,      1e19,    -1e19,
                                         2.5e9,   -2.5e9,   0x1p24,    0x1p62 * 1.5, -0.0,    65504};
          constexpr size_t kEdges = sizeof edges / sizeof edges[0];
          v[i] = i % 2 == 0 ? edges[(i / 2) % kEdges] : normal(gen) * spec.scale;
          break;
        }
        case Fill::special: {
          static const double specials[] = {kNaN, INFINITY, -INFINITY, 0.0, -0.0};
          v[i] = i % 5 == 1 ? specials[(i / 5) % 5] : normal(gen) * spec.scale;
          break;
        }
      }
      v[i] = representable(v[i], dtype);
    }
  });
  return v;
}

// A tensor laid out as its spec says: `base` owns the memory, `view` is what the operator sees.
struct Placed {
  Tensor base, view;
  // Base element of each view element, row-major; empty when the view is the whole base in order
  // (contiguous), which spares large tensors an index array.
  std::vector<int64_t> positions;
  int64_t position(size_t i) const { return positions.empty() ? static_cast<int64_t>(i) : positions[i]; }
};

Placed place(const Device& device, const TensorSpec& spec, DType dtype) {
  const Shape& shape = spec.shape;
  Placed p;
  switch (spec.layout) {
    case Layout::contiguous:
      p.base = Tensor::empty(device, shape, dtype);
      p.view = p.base;
      break;
    case Layout::transposed: {
      Shape stored = shape;
      std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
      p.base = Tensor::empty(device, stored, dtype);
      p.view = p.base.transpose(-1, -2);
      break;
    }
    case Layout::offset:  // a guard element on each side: a write just before or just past the view shows
      p.base = Tensor::empty(device, {shape_numel(shape) + 2}, dtype);
      p.view = p.base.slice(0, 1, shape_numel(shape) + 1).view(shape);
      break;
    case Layout::broadcast: {
      Shape row = shape;
      row[0] = 1;
      p.base = Tensor::empty(device, row, dtype);
      p.view = p.base.expand(shape);
      break;
    }
    case Layout::strided: {
      Shape wide = shape;
      wide.back() = 2 * shape.back() + 1;
      p.base = Tensor::empty(device, wide, dtype);
      p.view = p.base.slice(-1, 0, shape.back());
      break;
    }
  }
  const int64_t n = shape_numel(shape);
  if (spec.layout == Layout::contiguous) return p;
  p.positions.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, position = p.view.offset() - p.base.offset();
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      position += (rest % shape[static_cast<size_t>(d)]) * p.view.strides()[static_cast<size_t>(d)];
      rest /= shape[static_cast<size_t>(d)];
    }
    p.positions[static_cast<size_t>(i)] = position;
  }
  return p;
}

double sentinel_for(DType dtype, bool output) {
  if (is_float(dtype)) return output ? kOutputSentinel : kNaN;
  if (dtype == DType::boolean || dtype == DType::u8) return 0;
  return output ? kIntegerOutputSentinel : static_cast<double>(kIndexSentinel);
}

// The whole base buffer with `values` at the view's positions and the sentinel elsewhere.
HostValues base_image(const Placed& p, const HostValues& values, double sentinel) {
  HostValues image(static_cast<size_t>(p.base.numel()), sentinel);
  for (size_t i = 0; i < values.size(); ++i) image[static_cast<size_t>(p.position(i))] = values[i];
  return image;
}

HostValues read_view(const Placed& p, const HostValues& image) {
  HostValues values(static_cast<size_t>(p.view.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = image[static_cast<size_t>(p.position(i))];
  return values;
}

struct RunResult {
  std::vector<HostValues> outputs;  // per spec; empty for pure inputs
  std::string problem;              // a behaviour violation seen on the plugin
};

// Fills the whole of `base` with `value` on the device: one element from the host, then copies that
// double what is filled, so a large tensor needs neither a host image nor a plugin operator.
void fill_on_device(Stream& stream, const Tensor& base, double value) {
  const size_t element = dtype_size(base.dtype());
  const size_t total = static_cast<size_t>(base.numel()) * element,
               start = static_cast<size_t>(base.offset()) * element;
  if (total == 0) return;
  base.view({base.numel()}).slice(0, 0, 1).copy_from_host(stream, HostValues{value});
  DeviceBuffer& buffer = *base.buffer();
  for (size_t filled = element; filled < total; filled *= 2)
    stream.copy(buffer, start + filled, buffer, start, std::min(filled, total - filled));
}

// Materialises the case on `device`, runs it and reads back every output. On the plugin, inputs
// reach their memory through a copy queued behind a slow memset, so an operator that does not wait
// for earlier work on its stream reads NaN; afterwards inputs and the memory around outputs are
// checked to be untouched. Full-size tensors reach hundreds of millions of elements, so no host
// image is built where the values themselves (a contiguous input) or a device fill (a contiguous
// output) will do.
RunResult execute(const Case& c, const Device& device, Run run, const std::vector<HostValues>& inputs,
                  DeviceBuffer* delay = nullptr, bool finite_outputs = false) {
  Stream stream = device.create_stream();
  std::vector<Placed> placed;
  // What each base buffer held before the call, where it must be compared after it: an input's
  // whole buffer, and an output's buffer around the view (null where there is none).
  std::vector<HostValues> owned_images(c.tensors.size());
  std::vector<const HostValues*> images(c.tensors.size(), nullptr);
  std::vector<Tensor> views;
  const bool check = run == Run::plugin;
  std::vector<Tensor> staging;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const TensorSpec& spec = c.tensors[i];
    const DType dtype = dtype_in(spec, c.dtype, run);
    placed.push_back(place(device, spec, dtype));
    const Placed& p = placed.back();
    const bool output = spec.role == Role::output;
    // An output's own elements start as NaN, so that an element left unwritten, or read although
    // the contract says it is not (C of a gemm with beta 0), shows; around it, a finite sentinel
    // shows a write outside. `finite_outputs`: the sentinel inside too (see run_case).
    const double unwritten = is_float(dtype) && !finite_outputs ? kNaN : kOutputSentinel;
    const bool whole = p.positions.empty();  // the view is its whole base, in order
    if (output && whole) {
      fill_on_device(stream, p.base, unwritten);
      staging.emplace_back();
      views.push_back(p.view);
      continue;
    }
    if (whole) {
      images[i] = &inputs[i];
    } else {
      owned_images[i] =
          base_image(p, output ? HostValues(inputs[i].size(), unwritten) : inputs[i], sentinel_for(dtype, output));
      images[i] = &owned_images[i];
    }
    if (check && !output) {
      // Upload into a staging copy now; the real memory gets NaN and receives the data in stream order.
      staging.push_back(Tensor::empty(device, p.base.shape(), dtype));
      staging.back().copy_from_host(stream, *images[i]);
      fill_on_device(stream, p.base, sentinel_for(dtype, false));
    } else {
      staging.emplace_back();
      p.base.copy_from_host(stream, *images[i]);
    }
    views.push_back(p.view);
  }
  if (check) {
    stream.memset(*delay, 0);
    for (size_t i = 0; i < placed.size(); ++i)
      if (staging[i].defined())
        stream.copy(*placed[i].base.buffer(), 0, *staging[i].buffer(), 0, staging[i].buffer()->size());
    c.run(stream, views);
    stream.synchronize();
  } else {
    c.run(stream, views);
    stream.synchronize();
  }

  RunResult result;
  result.outputs.resize(c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const TensorSpec& spec = c.tensors[i];
    const Placed& p = placed[i];
    // Only the plugin's inputs are read back: to see that they were left alone.
    if (spec.role == Role::input && !check) continue;
    HostValues image = p.base.to_host(stream);
    const bool checked = check && result.problem.empty();
    if (spec.role == Role::input) {
      if (!checked) continue;
      for (size_t k = 0; k < image.size(); ++k) {
        if (!same_value(image[k], (*images[i])[k])) {
          result.problem = "input " + spec.name + " was modified";
          break;
        }
      }
      continue;
    }
    if (checked && images[i] != nullptr) {
      std::vector<bool> inside(image.size(), false);
      for (size_t k = 0; k < static_cast<size_t>(p.view.numel()); ++k)
        inside[static_cast<size_t>(p.position(k))] = true;
      for (size_t k = 0; k < image.size(); ++k) {
        if (!inside[k] && !same_value(image[k], (*images[i])[k])) {
          result.problem = "wrote outside output " + spec.name + " (element " + std::to_string(k) + " of its buffer)";
          break;
        }
      }
    }
    result.outputs[i] = p.positions.empty() ? std::move(image) : read_view(p, image);
  }
  return result;
}

// Input values for every spec, as the plugin run's dtypes hold them (derived ones computed on the
// reference in fp64 by the case's prepare, then rounded the same way).
std::vector<HostValues> make_inputs(const Case& c, const Device& reference, bool absolute) {
  std::vector<HostValues> inputs;
  for (const TensorSpec& spec : c.tensors) {
    inputs.push_back(spec.role == Role::output ? HostValues(static_cast<size_t>(shape_numel(spec.shape)), 0.0)
                                               : generate(c, spec, dtype_in(spec, c.dtype, Run::plugin)));
    if (spec.layout == Layout::broadcast && !inputs.back().empty()) {
      // Every row holds the one stored row's values, as the view shows them.
      HostValues& v = inputs.back();
      const size_t row = v.size() / static_cast<size_t>(spec.shape[0]);
      for (size_t i = row; i < v.size(); ++i) v[i] = v[i % row];
    }
  }
  if (c.prepare) {
    Stream stream = reference.create_stream();
    std::vector<Tensor> tensors;
    for (size_t i = 0; i < c.tensors.size(); ++i)
      tensors.push_back(
          Tensor::from_host(stream, inputs[i], c.tensors[i].shape, dtype_in(c.tensors[i], c.dtype, Run::exact)));
    c.prepare(stream, tensors);
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      if (c.tensors[i].fill != Fill::derived) continue;
      inputs[i] = tensors[i].to_host(stream);
      const DType dtype = dtype_in(c.tensors[i], c.dtype, Run::plugin);
      for (double& x : inputs[i]) x = representable(x, dtype);
    }
  }
  if (absolute)
    for (size_t i = 0; i < c.tensors.size(); ++i)
      if (is_float(dtype_in(c.tensors[i], c.dtype, Run::exact)))
        for (double& x : inputs[i]) x = std::fabs(x);
  return inputs;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

CaseResult run_case(const Case& c, const Devices& devices) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult result{.op = c.op, .name = c.name, .dtype = std::string(dtype_name(c.dtype))};
  const std::vector<HostValues> inputs = make_inputs(c, devices.reference, false);

  RunResult plugin;
  try {
    plugin = execute(c, devices.plugin, Run::plugin, inputs, devices.delay.get());
  } catch (const Error& e) {
    // A call outside the plugin's declared capability (dtype, strides) is not supported, not failed.
    result.state = e.status() == H2_STATUS_UNSUPPORTED ? CaseState::not_supported : CaseState::fail;
    result.message = (result.state == CaseState::fail ? "the plugin reported an error: " : "") + std::string(e.what());
    result.seconds = seconds_since(start);
    return result;
  }
  const RunResult exact = execute(c, devices.reference, Run::exact, inputs);
  const RunResult same_dtype = execute(c, devices.reference, Run::reference_same_dtype, inputs);
  bool needs_abs = false;
  for (const TensorSpec& spec : c.tensors)
    needs_abs |= spec.role != Role::input && error_model(c, spec.name).magnitude == Magnitude::abs_inputs &&
                 !error_model(c, spec.name).bit_exact;
  const RunResult abs_run =
      needs_abs ? execute(c, devices.reference, Run::exact, make_inputs(c, devices.reference, true)) : RunResult{};

  result.state = CaseState::pass;
  if (!plugin.problem.empty()) {
    result.state = CaseState::fail;
    result.message = plugin.problem;
  }
  const auto judge = [&](const RunResult& run, const std::string& context) {
    for (size_t i = 0; i < c.tensors.size(); ++i) {
      const TensorSpec& spec = c.tensors[i];
      if (spec.role == Role::input) continue;
      const Comparison comparison = compare_output(
          spec.name, dtype_in(spec, c.dtype, Run::plugin), spec.shape, error_model(c, spec.name), run.outputs[i],
          exact.outputs[i], same_dtype.outputs[i], needs_abs ? abs_run.outputs[i] : HostValues());
      if (context.empty()) result.outputs.push_back(comparison.error);
      if (!comparison.pass && result.state == CaseState::pass) {
        result.state = CaseState::fail;
        result.message = spec.name + ": " + comparison.error.first_mismatch + context;
      }
    }
  };
  judge(plugin, "");
  // Where the exact result holds NaN, an element the plugin left unwritten looks right in a NaN-filled
  // output: such a case runs once more with the outputs filled with a finite sentinel.
  bool exact_nan = false;
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].role != Role::input)
      exact_nan |=
          std::any_of(exact.outputs[i].begin(), exact.outputs[i].end(), [](double v) { return std::isnan(v); });
  if (exact_nan && result.state == CaseState::pass) {
    const RunResult again = execute(c, devices.plugin, Run::plugin, inputs, devices.delay.get(), true);
    if (!again.problem.empty()) {
      result.state = CaseState::fail;
      result.message = again.problem + " (outputs filled with a finite value)";
    }
    judge(again, " (outputs filled with a finite value before the call)");
  }
  result.seconds = seconds_since(start);
  return result;
}

CaseResult run_behaviour(const BehaviourCheck& check, const Devices& devices) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult result{.op = check.op, .name = check.name, .dtype = "-"};
  result.state = CaseState::fail;
  try {
    Stream stream = devices.plugin.create_stream();
    result.message = check.check(stream);
    if (result.message.empty()) result.state = CaseState::pass;
  } catch (const Error& e) {
    // A check that needs an operator the plugin does not provide cannot judge it.
    result.state = e.status() == H2_STATUS_UNSUPPORTED ? CaseState::not_supported : CaseState::fail;
    result.message = (result.state == CaseState::fail ? "unexpected error: " : "") + std::string(e.what());
  } catch (const std::exception& e) {
    result.message = std::string("unexpected error: ") + e.what();
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace h2::conformance
