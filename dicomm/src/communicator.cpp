// Communicator: the collectives' argument checks and routes (the plugin library, a hierarchy, or
// DiComm's flat algorithms of collective.cpp), split, barrier and abort; point-to-point is in
// point_to_point.cpp.
#include "h2/dicomm/communicator.hpp"

#include <algorithm>
#include <mutex>

#include "collectives/collective.hpp"
#include "collectives/island_path.hpp"
#include "collectives/vendor_path.hpp"
#include "communicator_checks.hpp"

namespace h2::dicomm {

namespace detail {

namespace {

void check_reducible(const char* call, const Tensor& t) {
  const DType d = t.dtype();
  if (d != DType::f32 && d != DType::f16 && d != DType::bf16 && d != DType::f64)
    usage(std::string(call) + ": " + t.describe() + " cannot be reduced (f32, f16, bf16 and f64 can)");
}

bool widened(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16;
}

ops::BinaryOp binary_of(ReduceOp op) {
  return op == ReduceOp::max ? ops::BinaryOp::maximum : ops::BinaryOp::add;
}

// The work buffer a reduction runs in: fp16 and bf16 widen to fp32 (one rounding at the end) unless
// `widen` is false, and `copy` makes a private copy so the caller's tensor is not touched.
Tensor work_buffer(Collective& c, const Tensor& source, bool copy, bool widen = true) {
  widen = widen && widened(source.dtype());
  if (!widen && !copy) return source;
  Tensor work = c.scratch(source.numel(), widen ? DType::f32 : source.dtype());
  ops::copy(c.link().stream(), source, work);
  return work;
}

// Average and cast back: the owner of each fully reduced piece does it once (every rank, after a
// recursive doubling). An average divides by the rank count rather than multiplying by its
// inverse: a quotient of two exact operands rounds alike on every plugin, while 1/3 may reach one
// plugin's kernel as a double and another's as a float, and ranks on two plugins then held results
// a bit apart.
void finalize(Stream& stream, int divisor, const Tensor& reduced, const Tensor& out) {
  if (divisor != 1) ops::binary(stream, ops::BinaryOp::div, reduced, divisor, reduced);
  if (!reduced.same_view(out)) ops::copy(stream, reduced, out);
}

int divisor_of(ReduceOp op, int ranks) {
  return op == ReduceOp::avg ? ranks : 1;
}

// Where a collective on `largest` (its largest buffer) runs, when not on DiComm's flat algorithms:
// the communicator's plugin library, or, above H2_DICOMM_SMALL_BYTES, where a hierarchy's steps pay
// for themselves, a hierarchy over its plugin groups or its islands. Both are decided collectively,
// at the communicator's first collective and first large one. Below that size a hierarchy over two
// plugins (2 + 2 ranks, cpu-reference and the emulated Ascend, one node) ran at 0.26-0.8x of flat
// for every collective at 4-16 KiB: its three steps' latencies against recursive doubling's one.
struct CollectiveRoute {
  PluginComm* library = nullptr;
  Hierarchy* hierarchy = nullptr;
};
CollectiveRoute collective_route(CommState& s, const Tensor& largest, bool allreduce) {
  VendorPath* path = library_path(s, largest.device());
  if (path && path->comm) return {path->comm.get(), nullptr};
  if (bytes_of(largest) <= s.world->small_bytes()) return {};
  if (path) return {nullptr, &*path->hierarchy};
  return {nullptr, island_hierarchy(s, largest.device(), allreduce)};
}

}  // namespace

Communicator communicator_over(std::shared_ptr<CommState> state) {
  return Communicator(std::move(state));
}

}  // namespace detail

using namespace detail;

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::avg: return "avg";
    case ReduceOp::max: return "max";
  }
  return "?";
}

// ---- Communicator ----

Communicator Communicator::world(const CommOptions& options) {
  auto state = std::make_shared<CommState>();
  state->world = World::create(options);
  state->id = 0;
  state->name = "world";
  state->rank = state->world->rank();
  for (int r = 0; r < state->world->size(); ++r) state->members.push_back(r);
  return Communicator(std::move(state));
}

const CommState& Communicator::state() const {
  if (!state_) usage("this communicator is not valid (split with a negative colour?)");
  return *state_;
}

int Communicator::rank() const {
  return state().rank;
}
int Communicator::size() const {
  return static_cast<int>(state().members.size());
}
int Communicator::world_rank(int r) const {
  if (r < 0 || r >= size()) usage("rank " + std::to_string(r) + " is not in communicator '" + name() + "'");
  return state().members[r];
}
const std::string& Communicator::name() const {
  return state().name;
}
const std::string& Communicator::provider() const {
  return state().world->engine().provider();
}
std::string Communicator::transport() const {
  return state().world->engine().transports();
}

std::string Communicator::collectives() const {
  const CommState& s = state();
  const std::string above = " above H2_DICOMM_SMALL_BYTES (" + std::to_string(s.world->small_bytes()) + " bytes)";
  if (const VendorPath* vendor = s.vendor.get(); vendor != nullptr && vendor->why_not.empty()) {
    const std::optional<CollectiveLibrary> library = PluginComm::library(vendor->device);
    const std::string name = library ? library->name : vendor->device.label() + "'s library";
    if (vendor->comm) return "on " + name + ", the plugin's collective library";
    if (vendor->hierarchy)
      return "hierarchically over " + std::to_string(vendor->hierarchy->groups.size()) + " plugin groups" + above +
             ": each group's library inside (this rank's: " + name +
             "), DiComm between the groups; DiComm's own algorithms below";
  }
  std::string own = "on DiComm's own algorithms";
  if (const IslandPath* islands = s.islands.get(); islands != nullptr && islands->hierarchy)
    own += ", hierarchically over " + std::to_string(islands->hierarchy->groups.size()) + " islands" + above +
           (islands->allreduce_flat ? " but allreduce flat (halving and doubling follows the islands)" : "");
  if (!s.world->vendor_collectives())
    own += " (H2_DICOMM_VENDOR_COLLECTIVES is off)";
  else if (s.vendor != nullptr)
    own += " (no plugin library: " + s.vendor->why_not + ")";
  else if (s.members.size() > 1)
    own += " (whether a plugin library serves it is decided at the first collective)";
  return own;
}

Communicator Communicator::split(int color, int key) const {
  CommState& parent = const_cast<CommState&>(state());
  World& world = *parent.world;
  const uint32_t split = parent.splits++;
  const std::string prefix = "dicomm/split/" + std::to_string(parent.id) + "/" + std::to_string(split) + "/";
  std::vector<std::pair<int, int>> choices(parent.members.size());  // (color, key) per parent rank
  if (Store* store = world.store()) {
    store->set(prefix + std::to_string(parent.rank), std::to_string(color) + " " + std::to_string(key));
    for (size_t r = 0; r < choices.size(); ++r) {
      const std::string value = store->get(prefix + std::to_string(r));
      const size_t space = value.find(' ');
      choices[r] = {std::stoi(value.substr(0, space)), std::stoi(value.substr(space + 1))};
    }
  } else {
    choices[0] = {color, key};
  }
  if (color < 0) return Communicator();
  std::vector<int> group;  // parent ranks with our colour, ordered by key then rank
  for (size_t r = 0; r < choices.size(); ++r)
    if (choices[r].first == color) group.push_back(static_cast<int>(r));
  std::stable_sort(group.begin(), group.end(), [&](int a, int b) { return choices[a].second < choices[b].second; });

  auto state = std::make_shared<CommState>();
  state->world = parent.world;
  state->name = parent.name + "/split(" + std::to_string(color) + ")";
  for (size_t i = 0; i < group.size(); ++i) {
    state->members.push_back(parent.members[group[i]]);
    if (group[i] == parent.rank) state->rank = static_cast<int>(i);
  }
  // The group's first rank takes an id from the store and tells the others.
  const std::string id_key = prefix + "id/" + std::to_string(color);
  if (world.store() == nullptr) {
    state->id = world.new_comm_id();
  } else if (state->rank == 0) {
    state->id = world.new_comm_id();
    world.store()->set(id_key, std::to_string(state->id));
  } else {
    state->id = static_cast<uint32_t>(std::stoul(world.store()->get(id_key)));
  }
  return Communicator(std::move(state));
}

void Communicator::allreduce(Stream& stream, const Tensor& tensor, ReduceOp op, Accumulation accumulation) const {
  check_tensor("allreduce", "the tensor", tensor);
  check_reducible("allreduce", tensor);
  CommState& s = const_cast<CommState&>(state());
  if (size() == 1 || tensor.numel() == 0) {
    ++s.sequence;
    return;  // sum, avg and max of one contribution are the contribution
  }
  const std::string what = "allreduce(" + std::string(reduce_op_name(op)) + ") of " + tensor.describe();
  const Tensor data = flat(tensor);
  if (const CollectiveRoute route = collective_route(s, tensor, true); route.library || route.hierarchy) {
    ++s.sequence;
    if (route.library)
      run_on_library(s, *route.library, stream, what,
                     [&] { route.library->allreduce(stream, data, data, library_op(op)); });
    else
      hierarchical_allreduce(s, *route.hierarchy, stream, data, op, accumulation, what);
    return;
  }
  Collective c(s, stream, tensor.device(), what);
  const bool widen = widened(data.dtype()) && accumulation == Accumulation::wide;
  const Tensor work = work_buffer(c, data, false, widen);
  // Also when the result may overwrite `data`: the widening copy reads it.
  const auto ready = widen ? c.record() : c.input_ready();
  const int divisor = divisor_of(op, size());
  const size_t bytes = bytes_of(work);
  if (bytes <= s.world->small_bytes()) {
    const Layout layout(work.numel(), 1, c.piece_elements(work.numel(), 1, work.dtype()));
    const Region mine = c.region(work, layout, ready);
    const Region other = c.region(c.scratch(work.numel(), work.dtype()), layout, nullptr);
    const Region result = recursive_doubling_allreduce(c, mine, other, layout, binary_of(op));
    c.run();
    finalize(c.link().stream(), divisor, result.flat, data);
  } else {
    // `work` (fp32 for 16-bit data) and `data` are cut alike, so a piece reduced in one is sent
    // from the other as soon as it is finished.
    const Layout layout(data.numel(), size(), c.piece_elements(data.numel(), size(), work.dtype()));
    const Region reduced = c.region(work, layout, ready);
    const Region result = work.same_view(data) ? reduced : c.region(data, layout, ready);
    const FinishPiece finish = [&](Transfer::Recv& recv, const Layout::Piece& piece) {
      const Tensor from = reduced.piece(piece), to = result.piece(piece);
      if (divisor == 1 && from.same_view(to)) return;
      recv.then = [from, to, divisor](Stream& on) { finalize(on, divisor, from, to); };
      recv.then_piece = result.index(piece);
    };
    if (s.world->halving_doubling(size())) {
      halving_doubling_allreduce(c, reduced, result, layout, binary_of(op), finish);
    } else {
      ring_reduce_scatter(c, reduced, layout, binary_of(op), finish);
      ring_allgather(c, result, layout);
    }
    c.run();
  }
  c.finish(stream);
}

void Communicator::reduce_scatter(Stream& stream, const Tensor& input, const Tensor& output, ReduceOp op,
                                  Accumulation accumulation) const {
  check_tensor("reduce_scatter", "the input", input);
  check_tensor("reduce_scatter", "the output", output);
  check_reducible("reduce_scatter", input);
  if (input.dtype() != output.dtype() || !(input.device() == output.device()) ||
      input.numel() != output.numel() * size())
    usage("reduce_scatter: the input " + input.describe() + " must hold size() = " + std::to_string(size()) +
          " times the output " + output.describe() + ", of the same dtype on the same device");
  CommState& s = const_cast<CommState&>(state());
  const std::string what = "reduce_scatter(" + std::string(reduce_op_name(op)) + ") of " + input.describe();
  if (size() > 1 && output.numel() > 0) {
    const CollectiveRoute route = collective_route(s, input, false);
    if (route.library) {
      ++s.sequence;
      run_on_library(s, *route.library, stream, what,
                     [&] { route.library->reduce_scatter(stream, flat(input), flat(output), library_op(op)); });
      return;
    }
    if (route.hierarchy) {
      ++s.sequence;
      hierarchical_reduce_scatter(s, *route.hierarchy, stream, flat(input), flat(output), op, accumulation, what);
      return;
    }
  }
  Collective c(s, stream, input.device(), what);
  const Tensor work = work_buffer(c, flat(input), true, accumulation == Accumulation::wide);
  const Tensor out = flat(output);
  const int64_t n = out.numel(), mine = rank() * n;
  const int divisor = divisor_of(op, size());
  if (size() > 1 && n > 0) {
    // Segment rank() of the layout is exactly [rank() * n, (rank() + 1) * n).
    const Layout layout(work.numel(), size(), c.piece_elements(work.numel(), size(), work.dtype()));
    const Region reduced = c.region(work, layout, c.record());
    ring_reduce_scatter(c, reduced, layout, binary_of(op), [&](Transfer::Recv& recv, const Layout::Piece& piece) {
      const Tensor from = reduced.piece(piece), to = out.slice(0, piece.begin - mine, piece.end - mine);
      recv.then = [from, to, divisor](Stream& on) { finalize(on, divisor, from, to); };
    });
    c.run();
  } else {
    finalize(c.link().stream(), divisor, work.slice(0, mine, mine + n), out);
  }
  c.finish(stream);
}

void Communicator::allgather(Stream& stream, const Tensor& input, const Tensor& output) const {
  check_tensor("allgather", "the input", input);
  check_tensor("allgather", "the output", output);
  if (input.dtype() != output.dtype() || !(input.device() == output.device()) ||
      output.numel() != input.numel() * size())
    usage("allgather: the output " + output.describe() + " must hold size() = " + std::to_string(size()) +
          " times the input " + input.describe() + ", of the same dtype on the same device");
  CommState& s = const_cast<CommState&>(state());
  const std::string what = "allgather of " + input.describe();
  if (size() > 1 && input.numel() > 0) {
    const CollectiveRoute route = collective_route(s, output, false);
    if (route.library) {
      ++s.sequence;
      run_on_library(s, *route.library, stream, what,
                     [&] { route.library->allgather(stream, flat(input), flat(output)); });
      return;
    }
    if (route.hierarchy) {
      ++s.sequence;
      hierarchical_allgather(s, *route.hierarchy, stream, flat(input), flat(output), what);
      return;
    }
  }
  Collective c(s, stream, input.device(), what);
  const int64_t n = input.numel();
  const Tensor out = flat(output);
  // The rank's own part is a byte copy (input and output are contiguous and of one dtype): every
  // plugin has one, while an operator copy needs the dtype among the operator's (the CUDA plugin's
  // operators take no f64; HeteroPP gathers its per-step statistics in f64).
  // (None where the input is the output's own part already: a hierarchical allreduce gathers so.)
  if (n > 0 && !input.same_view(out.slice(0, rank() * n, (rank() + 1) * n))) {
    const size_t element = dtype_size(input.dtype());
    c.link().stream().copy(*out.buffer(), static_cast<size_t>(out.offset() + rank() * n) * element, *input.buffer(),
                           static_cast<size_t>(input.offset()) * element, static_cast<size_t>(n) * element);
  }
  if (size() > 1 && n > 0) {
    const Layout layout(out.numel(), size(), c.piece_elements(out.numel(), size(), out.dtype()));
    ring_allgather(c, c.region(out, layout, c.record()), layout);
    c.run();
  }
  c.finish(stream);
}

void Communicator::broadcast(Stream& stream, const Tensor& tensor, int root) const {
  check_tensor("broadcast", "the tensor", tensor);
  world_rank(root);  // checks the root
  CommState& s = const_cast<CommState&>(state());
  if (size() == 1 || tensor.numel() == 0) {
    ++s.sequence;
    return;
  }
  const std::string what = "broadcast from rank " + std::to_string(root) + " of " + tensor.describe();
  const Tensor data = flat(tensor);
  if (const CollectiveRoute route = collective_route(s, tensor, false); route.library || route.hierarchy) {
    ++s.sequence;
    if (route.library)
      run_on_library(s, *route.library, stream, what, [&] { route.library->broadcast(stream, data, data, root); });
    else
      hierarchical_broadcast(s, *route.hierarchy, stream, data, root, what);
    return;
  }
  Collective c(s, stream, tensor.device(), what);
  const Layout layout(data.numel(), 1, c.piece_elements(data.numel(), 1, data.dtype()));
  const Region region = c.region(data, layout, c.input_ready());
  const size_t bytes = bytes_of(data);
  if (bytes <= s.world->small_bytes()) {
    tree_broadcast(c, region, layout, root);
  } else {
    chain_broadcast(c, region, layout, root);
  }
  c.run();
  c.finish(stream);
}

void Communicator::barrier() const {
  CommState& s = const_cast<CommState&>(state());
  const uint32_t sequence = s.sequence++;
  const int n = size(), r = rank();
  Engine& engine = s.world->engine();
  // Dissemination: after round k every rank has heard, indirectly, from 2^(k+1) ranks.
  for (int distance = 1; distance < n; distance <<= 1) {
    const int to = s.members[(r + distance) % n], from = s.members[(r - distance % n + n) % n];
    OpPtr out = engine.send(to, make_tag(TagKind::collective, s.id, s.members[r], sequence), nullptr, 0);
    OpPtr in = engine.recv(from, make_tag(TagKind::collective, s.id, from, sequence), nullptr, 0);
    const auto what = [&] {
      return "barrier on communicator '" + s.name + "' (rank " + std::to_string(r) + " of " + std::to_string(n) +
             "): rank " + std::to_string((r - distance % n + n) % n) + " has not arrived";
    };
    engine.wait(in, what);
    engine.wait(out, what);
  }
}

void Communicator::abort(const std::string& reason) const {
  World& world = *state().world;
  world.abort_vendor_comms("rank " + std::to_string(world.rank()) + " aborted: " + reason);
  world.engine().fail(CommErrorKind::aborted, world.rank(),
                      "DiComm: this rank (" + std::to_string(world.rank()) + ") aborted: " + reason);
  if (Store* store = world.store()) store->abort(reason);
}

void Communicator::abort_after(const std::exception& error) const {
  if (const auto* comm = dynamic_cast<const CommError*>(&error);
      comm != nullptr && (comm->kind() == CommErrorKind::peer_failed || comm->kind() == CommErrorKind::aborted))
    return;
  abort(error.what());
}

}  // namespace h2::dicomm
