// The sum of every layer's gradients over the replicas that hold it (HeteroPP's data parallelism),
// also when replicas cut a layer with different tensor-parallel degrees (HexiScale's asymmetric
// tensor parallelism), overlapped with the backward pass that makes them.
//
// What is summed where. A layer's sharded parameters are cut, for the sum, into F pieces, F the least
// common multiple of its holders' degrees: a rank of degree t with tensor-parallel index r holds
// pieces [r F/t, (r+1) F/t) of each of the parameter's groups (w_qkv's q, k and v columns cut
// apiece). Every piece is summed over the ranks holding it, one per replica. When all holders share
// one degree, a piece is a rank's whole shard and the sum runs in place on ranges of the flat
// gradient buffer; otherwise a rank packs its pieces (strided views) into one buffer, sums it, and
// unpacks. A layer's whole (unsharded) parameters, identical on the ranks of one tensor-parallel
// group, are then summed over all its holders with each rank's copy weighted by 1/t, so that every
// replica counts once. A group is a set of ranks with its own communicator.
//
// When. Each group's layers are cut into buckets of whole layers (GradientSyncOptions::bucket_bytes,
// in the same layer order on every rank). The step's last backward pass reports each layer as its
// gradients are enqueued (GptStage::backward's `layer_done`); a bucket whose layers are all done gets
// an event on the stage's stream, and a thread of its own sums it on a stream of its own once the
// event has completed, while the pass goes on. Every rank takes its buckets in one global order
// (the order their last layers finish in backward), so no two ranks wait on each other in a cycle,
// and the stage's thread never waits for the gradient thread before the pipeline is over.
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/heteropp/trainer.hpp"

namespace h2::heteropp {

class GradientSync {
 public:
  // Collective over `world` (it splits one communicator per group of two or more ranks). `stream`
  // is the stage's: the one the gradients are made on.
  GradientSync(const Placement& placement, const heteroauto::Model& model_description,
               const dicomm::Communicator& world, GptStage& model, Stream& stream, Timeline& timeline,
               const GradientSyncOptions& options);
  // Stops the gradient thread. If it is inside a sum, that sum must end first: after an error, abort
  // the communicator before destroying this.
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Before the step's pipeline: every bucket waits for its layers again.
  void begin_step();
  // The step's last backward pass on this stage has enqueued `layer`'s gradients on the stream.
  void layer_done(int layer);

  struct StepTimes {
    double comm_s = 0;     // from each bucket's start to its end, added up
    double exposed_s = 0;  // how long finish() waited
  };
  // After the pipeline: starts what has not started (everything, without overlap) and waits until
  // every bucket is summed; work enqueued on the stream afterwards sees the sums. Rethrows the
  // gradient thread's error (a CommError when a peer failed).
  StepTimes finish();

 private:
  // What this rank sends in one group: views of its gradients, each weighted (1 / its degree for a
  // mixed layer's whole parameters).
  struct Part {
    Tensor view;
    double weight = 1;
  };
  struct Group {
    std::vector<int> ranks;     // the world ranks summing these parts
    dicomm::Communicator comm;  // invalid outside the group, and for one rank
  };
  struct Bucket {
    size_t group = 0;
    std::vector<int> layers;  // in backward order (descending)
    double bytes = 0;         // the layers' f32 gradients, whole (the same estimate on every rank)
    size_t created = 0;       // for a stable order
    bool mine = false;        // this rank sums it (it holds its layers and the group has others)
    std::vector<Part> parts;  // strided pieces and weighted whole parameters
    std::vector<std::pair<int64_t, int64_t>> ranges;  // in place: [begin, end) of the flat gradients
    int64_t range_elements = 0, part_elements = 0;    // this rank's, per sum
    // Per step:
    size_t layers_left = 0;
    std::optional<Event> ready;  // recorded on the stage's stream when its last layer was done
    bool started = false;
  };

  size_t group_of(std::map<std::vector<int>, size_t>& index, const std::vector<int>& ranks);
  // Appends `layer`'s share for `group` to the group's open bucket (closing it first when full).
  Bucket& bucket_for(std::map<size_t, size_t>& open, size_t group, int layer, double layer_bytes);
  void add_layer(std::map<std::vector<int>, size_t>& index, std::map<size_t, size_t>& open, int layer,
                 double layer_bytes);
  void add_range(Bucket& bucket, const Parameter& p);

  void start_locked(Bucket& bucket);  // records its event and hands it to the gradient thread
  void run_thread();
  void sum(Bucket& bucket);  // on the gradient thread
  Tensor packed(const Bucket& bucket, DType dtype);
  void unpack(const Bucket& bucket, const Tensor& packed);

  const Placement& placement_;
  const dicomm::Communicator& world_;
  const StageRole& role_;
  GptStage& model_;
  Stream& stream_;
  Timeline& timeline_;
  GradientSyncOptions options_;
  std::vector<Group> groups_;
  std::vector<Bucket> buckets_;                  // every rank's, in the global order
  std::vector<size_t> mine_;                     // this rank's buckets, in that order
  std::map<int, std::vector<size_t>> by_layer_;  // layer -> this rank's buckets holding it

  // The gradient thread and what it shares with the stage's thread, under mutex_.
  std::optional<Stream> comm_stream_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t next_ = 0;  // the position in mine_ the gradient thread sums next
  size_t summed_ = 0;
  double comm_s_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace h2::heteropp
