#include "bench_comm_command.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli_checks.hpp"
#include "h2/dicomm/communicator.hpp"
#include "h2/dicomm/device_select.hpp"
#include "h2/h2.hpp"
#include "plugin_option_args.hpp"

namespace h2::tools {

namespace {

using dicomm::Communicator;
using dicomm::ReduceOp;

struct Row {
  std::string op;
  uint64_t bytes = 0;  // nccl-tests' "size": the whole buffer (for allgather/reduce_scatter, all ranks' blocks)
  int64_t count = 0;   // elements of that buffer
  double time_us = 0;  // per operation, the slowest rank
  double algbw = 0, busbw = 0;  // GB/s (1e9 bytes per second)
  int64_t wrong = 0;            // elements that differ from the expected result, over all ranks
  int iterations = 0;           // timed
};

// nccl-tests' bus bandwidth factors (doc/PERFORMANCE.md): what each link carries for the operation.
double bus_factor(const std::string& op, int n) {
  if (op == "allreduce") return 2.0 * (n - 1) / n;
  if (op == "allgather" || op == "reduce_scatter") return static_cast<double>(n - 1) / n;
  return 1;
}

// rank r's contribution: small integers, so sums over any number of ranks are exact.
std::vector<double> pattern(int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>((rank + 1 + i) % 5);
  return v;
}

class Bench {
 public:
  Bench(const BenchCommOptions& options, Communicator& comm, Device device, Stream& stream)
      : options_(options),
        comm_(comm),
        device_(std::move(device)),
        stream_(stream),
        dtype_(parse_dtype(options.dtype)),
        reduce_(options.reduce == "avg"   ? ReduceOp::avg
                : options.reduce == "max" ? ReduceOp::max
                                          : ReduceOp::sum) {}

  Row measure(const std::string& op, uint64_t bytes) {
    const int n = comm_.size();
    const size_t element = dtype_size(dtype_);
    Row row{op, bytes};
    int64_t total = static_cast<int64_t>(bytes / element);
    if (op == "allgather" || op == "reduce_scatter") total -= total % n;  // equal blocks
    row.count = total;
    row.bytes = static_cast<uint64_t>(total) * element;
    const int64_t block = (op == "allgather" || op == "reduce_scatter") ? total / n : total;
    Tensor a = Tensor::from_host(stream_, pattern(comm_.rank(), op == "allgather" ? block : total),
                                 {op == "allgather" ? block : total}, dtype_);
    Tensor b = Tensor::empty(device_, {op == "reduce_scatter" ? block : total}, dtype_);
    auto run_once = [&] {
      if (op == "allreduce") comm_.allreduce(stream_, a, reduce_);
      if (op == "allgather") comm_.allgather(stream_, a, b);
      if (op == "reduce_scatter") comm_.reduce_scatter(stream_, a, b, reduce_);
      if (op == "broadcast") comm_.broadcast(stream_, a, 0);
      if (op == "sendrecv") {
        auto in = comm_.irecv(stream_, b, (comm_.rank() + n - 1) % n);
        auto out = comm_.isend(stream_, a, (comm_.rank() + 1) % n);
        out.wait();
        in.wait();
      }
      if (op == "pingpong") ping_pong(a, b);
    };
    for (int i = 0; i < options_.warmup; ++i) run_once();
    stream_.synchronize();
    comm_.barrier();
    row.iterations = iterations_at(bytes);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < row.iterations; ++i) run_once();
    stream_.synchronize();
    // A ping-pong moves the message twice per iteration; like fi_pingpong, report one transfer.
    const double elapsed_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
        (row.iterations * (op == "pingpong" ? 2 : 1));
    row.time_us = reduce_scalar(elapsed_us, ReduceOp::max);
    row.algbw = static_cast<double>(row.bytes) / (row.time_us * 1e3);
    row.busbw = row.algbw * bus_factor(op, n);
    row.wrong = static_cast<int64_t>(reduce_scalar(static_cast<double>(check(op, total, block)), ReduceOp::sum));
    return row;
  }

 private:
  // --scale-below: small sizes run up to 8x the iterations, as bench/dicomm/peer_result.hpp's
  // scaled_iterations does for the peers compare.py runs alongside.
  int iterations_at(uint64_t bytes) const {
    if (bytes == 0 || bytes >= options_.scale_below) return options_.iterations;
    return options_.iterations * static_cast<int>(std::min<uint64_t>(8, options_.scale_below / bytes));
  }

  // Rank 0 sends its `out` into rank 1's `in`, then rank 1 its `out` into rank 0's `in`; other ranks
  // sit it out. Each answers from its own send buffer, as fi_pingpong does: echoing the buffer just received
  // makes the next copy read lines still dirty in the other core's cache (40% slower here).
  void ping_pong(const Tensor& out, const Tensor& in) {
    if (comm_.rank() == 0) {
      comm_.send(stream_, out, 1);
      comm_.recv(stream_, in, 1);
    } else if (comm_.rank() == 1) {
      comm_.recv(stream_, in, 0);
      comm_.send(stream_, out, 0);
    }
  }

  static DType parse_dtype(const std::string& name) {
    if (name == "f16") return DType::f16;
    if (name == "bf16") return DType::bf16;
    return DType::f32;
  }

  // Every rank's `value` reduced on the host: gathered as bytes, which every plugin copies, where an
  // f64 reduction needs f64 operators (the Ascend and MLU plugins have none).
  double reduce_scalar(double value, ReduceOp op) {
    Tensor mine = Tensor::from_host(stream_, std::vector<double>{value}, {1}, DType::f64);
    Tensor all = Tensor::empty(device_, {comm_.size()}, DType::f64);
    comm_.allgather(stream_, mine, all);
    const std::vector<double> values = all.to_host(stream_);
    return op == ReduceOp::max ? *std::max_element(values.begin(), values.end())
                               : std::accumulate(values.begin(), values.end(), 0.0);
  }

  // One more run on fresh inputs, compared with what it must give; returns wrong elements.
  int64_t check(const std::string& op, int64_t total, int64_t block) {
    const int n = comm_.size(), r = comm_.rank();
    std::vector<double> got, want;
    if (op == "allreduce") {
      Tensor t = Tensor::from_host(stream_, pattern(r, total), {total}, dtype_);
      comm_.allreduce(stream_, t, reduce_);
      got = t.to_host(stream_);
      want.assign(static_cast<size_t>(total), reduce_ == ReduceOp::max ? -1e300 : 0.0);
      for (int q = 0; q < n; ++q) {
        const auto p = pattern(q, total);
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = reduce_ == ReduceOp::max ? std::max(want[i], p[i]) : want[i] + p[i];
      }
      if (reduce_ == ReduceOp::avg)
        for (double& w : want) w /= n;
    } else if (op == "reduce_scatter") {
      Tensor in = Tensor::from_host(stream_, pattern(r, total), {total}, dtype_);
      Tensor out = Tensor::empty(device_, {block}, dtype_);
      comm_.reduce_scatter(stream_, in, out, reduce_);
      got = out.to_host(stream_);
      want.assign(static_cast<size_t>(block), reduce_ == ReduceOp::max ? -1e300 : 0.0);
      for (int q = 0; q < n; ++q) {
        const auto p = pattern(q, total);
        for (size_t i = 0; i < want.size(); ++i) {
          const double v = p[static_cast<size_t>(r * block) + i];
          want[i] = reduce_ == ReduceOp::max ? std::max(want[i], v) : want[i] + v;
        }
      }
      if (reduce_ == ReduceOp::avg)
        for (double& w : want) w /= n;
    } else if (op == "allgather") {
      Tensor in = Tensor::from_host(stream_, pattern(r, block), {block}, dtype_);
      Tensor out = Tensor::empty(device_, {total}, dtype_);
      comm_.allgather(stream_, in, out);
      got = out.to_host(stream_);
      for (int q = 0; q < n; ++q) {
        const auto p = pattern(q, block);
        want.insert(want.end(), p.begin(), p.end());
      }
    } else if (op == "broadcast") {
      Tensor t = Tensor::from_host(stream_, pattern(r, total), {total}, dtype_);
      comm_.broadcast(stream_, t, 0);
      got = t.to_host(stream_);
      want = pattern(0, total);
    } else if (op == "pingpong") {
      Tensor in = Tensor::empty(device_, {total}, dtype_);
      ping_pong(Tensor::from_host(stream_, pattern(r, total), {total}, dtype_), in);
      if (r < 2) {
        got = in.to_host(stream_);
        want = pattern(1 - r, total);  // the other one's message
      }
    } else {
      Tensor in = Tensor::empty(device_, {total}, dtype_);
      Tensor out = Tensor::from_host(stream_, pattern(r, total), {total}, dtype_);
      auto receive = comm_.irecv(stream_, in, (r + n - 1) % n);
      comm_.isend(stream_, out, (r + 1) % n).wait();
      receive.wait();
      got = in.to_host(stream_);
      want = pattern((r + n - 1) % n, total);
    }
    const double tolerance = dtype_ == DType::f32 ? 1e-6 : 8e-3;
    int64_t wrong = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::abs(got[i] - want[i]) > tolerance * (1 + std::abs(want[i]))) ++wrong;
    return wrong;
  }

  const BenchCommOptions& options_;
  Communicator& comm_;
  Device device_;
  Stream& stream_;
  DType dtype_;
  ReduceOp reduce_;
};

void print_header(const std::string& op, const Communicator& comm, const BenchCommOptions& options,
                  const Device& device) {
  const std::string scaled =
      options.scale_below > 0 ? ", up to 8x below " + std::to_string(options.scale_below) + " bytes" : "";
  std::printf("# h2 bench comm: %s, %d ranks, %s, %s, %s, %d iterations%s (%d warm-up), device %s\n", op.c_str(),
              comm.size(), comm.transport().c_str(), options.dtype.c_str(), options.reduce.c_str(), options.iterations,
              scaled.c_str(), options.warmup, device.label().c_str());
  std::printf("# time: per operation, slowest rank; GB/s = 1e9 bytes/s; busbw as nccl-tests\n");
  std::printf("%14s %12s %6s %6s %12s %12s %12s %8s\n", "size(B)", "count", "type", "redop", "time(us)", "algbw(GB/s)",
              "busbw(GB/s)", "#wrong");
}

// Every size of every asked-for collective, printed by rank 0; exit status 1 where a result was wrong.
int run_bench(const BenchCommOptions& options, Communicator& world, const Device& device, Stream& stream) {
  Bench bench(options, world, device, stream);
  const bool printer = world.rank() == 0;
  std::ofstream json_out;
  if (printer && !options.json.empty()) {
    json_out.open(options.json);
    if (!json_out) throw Error(H2_STATUS_INVALID_ARGUMENT, "cannot write '" + options.json + "'");
  }
  std::vector<std::string> ops = {options.op};
  if (options.op == "all") ops = {"allreduce", "allgather", "reduce_scatter", "broadcast", "sendrecv", "pingpong"};
  int64_t wrong = 0;
  for (const std::string& op : ops) {
    if (op == "pingpong" && world.size() < 2) {
      if (options.op == "all") continue;
      throw Error(H2_STATUS_INVALID_ARGUMENT, "--op pingpong needs at least 2 ranks (h2 launch -n 2 -- ...)");
    }
    if (printer) print_header(op, world, options, device);
    for (uint64_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= options.factor) {
      const Row row = bench.measure(op, bytes);
      wrong += row.wrong;
      if (printer) {
        const bool reduces = op == "allreduce" || op == "reduce_scatter";
        std::printf("%14llu %12lld %6s %6s %12.1f %12.3f %12.3f %8lld\n", static_cast<unsigned long long>(row.bytes),
                    static_cast<long long>(row.count), options.dtype.c_str(), reduces ? options.reduce.c_str() : "-",
                    row.time_us, row.algbw, row.busbw, static_cast<long long>(row.wrong));
        std::fflush(stdout);
        if (json_out)
          json_out << nlohmann::json{{"library", "dicomm"},
                                     {"op", op},
                                     {"ranks", world.size()},
                                     {"provider", world.provider()},
                                     {"transport", world.transport()},
                                     {"collectives", world.collectives()},
                                     {"dtype", options.dtype},
                                     {"bytes", row.bytes},
                                     {"count", row.count},
                                     {"time_us", row.time_us},
                                     {"algbw_gbps", row.algbw},
                                     {"busbw_gbps", row.busbw},
                                     {"wrong", row.wrong},
                                     {"iterations", row.iterations}}
                          .dump()
                   << "\n";
      }
      if (bytes > options.max_bytes / options.factor) break;
    }
    if (printer && op != "sendrecv" && op != "pingpong")
      std::printf("# collectives: %s\n", world.collectives().c_str());
  }
  if (printer && wrong > 0)
    std::printf("# %lld wrong elements: DiComm gave wrong results\n", static_cast<long long>(wrong));
  return wrong == 0 ? 0 : 1;
}

}  // namespace

void add_bench_command(CLI::App& app, BenchCommOptions& options, int& exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks of H2's parts");
  bench->require_subcommand(1);
  CLI::App* comm = bench->add_subcommand(
      "comm", "DiComm bandwidth per collective and size; run on every rank: h2 launch -n N -- h2 bench comm");
  comm->add_option(
          "--op", options.op,
          "allreduce, allgather, reduce_scatter, broadcast, sendrecv (every rank sends to the next and receives "
          "from the previous at once), pingpong (rank 0 to 1 and back; time of one transfer, as fi_pingpong) "
          "or all")
      ->check(CLI::IsMember({"allreduce", "allgather", "reduce_scatter", "broadcast", "sendrecv", "pingpong", "all"}));
  comm->add_option("--min-bytes", options.min_bytes, "smallest message: bytes, or with a unit (16K, 16M, 16MiB, 1G)")
      ->transform(byte_size_range(4, uint64_t{1} << 34));
  comm->add_option("--max-bytes", options.max_bytes, "largest message: bytes, or with a unit (16K, 16M, 16MiB, 1G)")
      ->transform(byte_size_range(4, uint64_t{1} << 34));
  comm->add_option("--factor", options.factor, "size multiplier between rows")->check(CLI::Range(2, 1024));
  comm->add_option("--iters", options.iterations, "timed iterations per size")->check(CLI::Range(1, 1000000));
  comm->add_option("--warmup", options.warmup, "untimed iterations first")->check(CLI::Range(0, 1000000));
  comm->add_option("--scale-below", options.scale_below,
                   "sizes below this run --iters x min(8, this / size) timed iterations, so that small sizes are "
                   "timed over a longer window (bytes or with a unit, as --max-bytes; default 0: --iters at every "
                   "size)")
      ->transform(byte_size_range(0, std::numeric_limits<uint64_t>::max()));
  comm->add_option("--dtype", options.dtype, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  comm->add_option("--redop", options.reduce, "sum, avg or max")->check(CLI::IsMember({"sum", "avg", "max"}));
  comm->add_option("--json", options.json, "also write one JSON object per row to this file (rank 0)");
  add_plugin_option_flag(comm, options.plugin_options);
  comm->callback([&options, &exit_code] { exit_code = run_bench_comm(options); });
}

int run_bench_comm(const BenchCommOptions& options) {
  if (options.min_bytes > options.max_bytes) {
    std::cerr << "h2 bench comm: --min-bytes " << options.min_bytes << " is above --max-bytes " << options.max_bytes
              << "\n";
    return 2;
  }
  try {
    const dicomm::RankInfo info = dicomm::rank_info_from_environment();
    RuntimeOptions runtime_options = dicomm::runtime_options_for_device();
    runtime_options.plugin_options = parse_plugin_options(options.plugin_options);
    Runtime runtime(runtime_options);
    const Device device = dicomm::select_device(runtime, info);
    Stream stream = device.create_stream();
    Communicator world = Communicator::world();
    try {
      return run_bench(options, world, device, stream);
    } catch (const std::exception& e) {
      world.abort_after(e);  // the other ranks stop at once, naming this one, instead of timing out
      throw;
    }
  } catch (const std::exception& e) {
    std::cerr << "h2 bench comm: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace h2::tools
