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
//
// Sharded (GradientSyncOptions::shard_optimizer, ZeRO-1 / Megatron's distributed optimizer): a
// bucket's parts are packed and reduce-scattered over its group instead of all-reduced, so that each
// of the group's n ranks ends with the sums of 1/n of the bucket (its Slice); ShardedAdamW updates
// that slice of the masters with moments for it alone and gathers the whole weights back (in the
// model's dtype: a 16-bit model's ranks round their slices first). Every
// element of every layer is then in exactly one rank's slice, across replicas of any degree.
#pragma once

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "h2/dicomm/communicator.hpp"
#include "h2/heteropp/gpt.hpp"
#include "h2/heteropp/placement.hpp"
#include "h2/heteropp/timeline.hpp"
#include "h2/heteropp/trainer.hpp"
#include "packing.hpp"

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

  // ---- the sharded mode ----

  // A view of one parameter that travels in a bucket: its whole tensor, or a piece of it along one
  // axis (a piece of a tensor-parallel shard). The same view of the master, the gradient or a moment.
  struct Part {
    size_t parameter = 0;  // index in GptStage::parameters()
    int axis = -1;         // -1: the whole tensor
    int64_t begin = 0, end = 0;
    double weight = 1;    // the gradient's, in the sum (1 / its degree for a mixed layer's whole parameters)
    bool counted = true;  // enters the global gradient norm (a tensor-parallel copy of a whole parameter does once)
    Tensor of(const Tensor& t) const { return axis < 0 ? t : t.slice(axis, begin, end); }
  };
  // This rank's share of one bucket in the sharded mode.
  struct Slice {
    const dicomm::Communicator* comm = nullptr;  // the bucket's group
    std::vector<Part> parts;                     // the bucket's, in packing order (the same on every member)
    int64_t length = 0;                          // the packed elements, padded to a multiple of the group's size
    int64_t begin = 0, size = 0;                 // this rank's [begin, begin + size) of them
    Tensor grad;                                 // f32 [size]: the summed gradients there, after finish()
    // The slice's stretches that each lie in one part: [offset, offset + elements) of the slice, in
    // order, with that part's index. What AdamW and the norm take.
    struct Segment {
      size_t part = 0;
      int64_t offset = 0, elements = 0;
      bool decay = false;  // a matrix's (weight decay applies)
    };
    std::vector<Segment> segments;
  };
  bool sharded() const { return options_.shard_optimizer; }
  // This rank's slices, in the global bucket order (empty without sharding).
  const std::vector<Slice>& slices() const { return slices_; }
  // Whether parameter i is updated through the slices (its layer is summed over two or more ranks).
  bool in_slices(size_t parameter) const { return sliced_parameters_.count(parameter) > 0; }

 private:
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
    std::vector<Part> parts;  // strided pieces and weighted whole parameters (every part, when sharded)
    std::vector<std::pair<int64_t, int64_t>> ranges;  // in place: [begin, end) of the flat gradients
    int64_t range_elements = 0, part_elements = 0;    // this rank's, per sum
    size_t slice = 0;                                 // its Slice in slices_, when sharded
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
  void add_part(Bucket& bucket, Part part);
  std::vector<WeightedView> gradient_views(const Bucket& bucket) const;
  void make_slice(Bucket& bucket);

  void start_locked(Bucket& bucket);  // records its event and hands it to the gradient thread
  void run_thread();
  void sum(Bucket& bucket);  // on the gradient thread

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
  std::vector<Slice> slices_;
  std::set<size_t> sliced_parameters_;

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
