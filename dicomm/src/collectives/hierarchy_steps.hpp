// What every hierarchical collective (hierarchy.hpp) is made of: the steps inside this rank's group
// (its plugin library's, or DiComm's own), the communicator between the groups, temporaries that
// outlive a failed step, and element copies between flat tensors.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "collectives/hierarchy.hpp"

namespace h2::dicomm::detail {

// The steps of one hierarchical call: inside this rank's group (its library's or DiComm's) and the
// communicators between the groups. Constructing it logs (info) the communicator's first
// hierarchical call of `kind`.
class Steps {
 public:
  Steps(CommState& s, Hierarchy& h, Stream& stream, std::string what, const std::string& kind);

  // Inside this rank's group; nothing for a group of one.
  void allreduce_inside(const Tensor& data, ReduceOp op, Accumulation accumulation);
  void reduce_scatter_inside(const Tensor& input, const Tensor& output, ReduceOp op, Accumulation accumulation);
  void allgather_inside(const Tensor& input, const Tensor& output);
  void broadcast_inside(const Tensor& data, int root);
  // Between the groups (Hierarchy::across), and over every rank for the groups' exchanges
  // (Hierarchy::exchange, groups of several sizes).
  Communicator across() const { return communicator_over(h_.across); }
  Communicator exchange() const { return communicator_over(h_.exchange); }

 private:
  void on_library(const char* step, const std::function<void()>& call);
  CommState& s_;
  Hierarchy& h_;
  Stream& stream_;
  std::string what_;
};

// The temporaries of one call, from `stream`'s caching allocator: DiComm's steps on their Link's
// stream leave `stream` waiting for all they did, and a library runs on `stream` itself, so they
// may go back when the call returns. A step that failed may have left work on them queued on the
// Link's stream: then they stay with the communicator instead, where no later call reuses them.
// Refuses (CommError usage) a stream of another device than `device`.
class Temporaries {
 public:
  Temporaries(CommState& s, Stream& stream, const Device& device);
  Temporaries(const Temporaries&) = delete;
  Temporaries& operator=(const Temporaries&) = delete;
  ~Temporaries();
  Tensor make(int64_t numel, DType dtype);

 private:
  CommState& s_;
  Stream& stream_;
  std::vector<Tensor> made_;
  int exceptions_;
};

// `count` elements of `from` from element `from_at` into `to` from element `to_at` (flat tensors of
// one dtype): a byte copy, which every plugin has for every dtype.
void copy_elements(Stream& stream, const Tensor& from, int64_t from_at, const Tensor& to, int64_t to_at, int64_t count);

// Reduce-scatter and allgather over groups of several sizes (hierarchy_blocks.cpp; block_layout in
// islands.hpp says who holds what): the steps hierarchical_reduce_scatter and hierarchical_allgather
// take where the groups' sizes differ.
void reduce_scatter_over_sizes(CommState& s, Hierarchy& h, Steps& steps, Stream& stream, const Tensor& input,
                               const Tensor& output, ReduceOp op, Accumulation accumulation);
void allgather_over_sizes(CommState& s, Hierarchy& h, Steps& steps, Stream& stream, const Tensor& input,
                          const Tensor& output);

}  // namespace h2::dicomm::detail
