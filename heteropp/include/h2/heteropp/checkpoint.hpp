// Checkpoints stored per layer, not per stage, so that a run may resume under another plan (other
// devices, another layer split): whichever rank holds a layer then reads that layer's file.
//
// Layout of ROOT (`h2 train --out DIR` writes ROOT = DIR/checkpoints):
//   ROOT/step-000120/layer-embedding.bin, layer-block-0000.bin, ..., layer-head.bin
//   ROOT/step-000120/manifest.json     names every layer file with the XXH3-64 of its header (which
//                                      holds its tensors' hashes), so that no layer file of another
//                                      step or run is read in its place; its own "xxh3" hashes the
//                                      rest of it (compact dump), checked on read
//   ROOT/latest                        the name of the newest committed step directory
//
// Commit protocol: a committed step directory is never written again. A checkpoint is written into
// a fresh ROOT/step-000120.partial; its manifest is written there last; the directory is fsync'ed and
// renamed to ROOT/step-000120 (step-000120.2, .3, ... when a committed directory of an abandoned run
// holds that name, as when a run resumed from an earlier step writes into the same ROOT); then
// `latest` is replaced. Every file is written to a temporary name, fsync'ed, renamed into place and
// its directory fsync'ed. A crash at any moment leaves `latest` naming a whole checkpoint. After the
// commit, ROOT holds one history: other checkpoints of this step or later (an abandoned run's future)
// are removed, and so are committed ones older than the newest `keep` and every partial directory.
//
// A layer file: the 8 bytes "H2CKPT01", a little-endian uint64 header length, a JSON header
// {"layer", "tensors": [{"name", "shape", "dtype": "f32", "offset", "bytes", "xxh3"}]}, then the raw
// data. "xxh3" is the tensor's data hashed with XXH3-64 (16 hex digits); reading refuses a tensor
// whose data hash differs, naming the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "h2/stream.hpp"
#include "h2/tensor.hpp"

namespace h2::heteropp {

// One tensor of a layer's state: a parameter ("block.3.w_qkv") or its optimizer moments
// ("block.3.w_qkv.exp_avg", ".exp_avg_sq"). f32, contiguous.
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// Everything besides the layers that a run needs to continue exactly.
struct CheckpointState {
  int64_t step = 0;             // steps completed
  int64_t optimizer_steps = 0;  // AdamW's step count (steps skipped for overflow do not count)
  int64_t samples = 0;          // data position: samples consumed, the next step starts there
  double loss_scale = 1;
  int64_t good_steps = 0;  // steps since the loss scale last changed
  uint64_t seed = 0;       // weights' and data's random streams derive from it
  nlohmann::json model;    // the model description, to refuse resuming another model
  std::vector<std::string> data_files;
  nlohmann::json plan;  // the plan that wrote it (informational)
  // Read from a manifest: each layer file's name -> the XXH3-64 of its header (empty for manifests
  // written before layer files were named with their hashes). Not written from here: a commit hashes
  // the files it finds.
  std::map<std::string, std::string> layer_headers;
};

// "layer-block-0003.bin"; layer -1 is "layer-embedding.bin", layer == model_layers "layer-head.bin".
std::string layer_file_name(int layer, int model_layers);
// ROOT/step-000120, the name a committed checkpoint of that step takes when it is free.
std::string step_directory(const std::string& root, int64_t step);

// ROOT/step-000120.partial, where step 120's checkpoint is written before its commit.
std::string partial_directory(const std::string& root, int64_t step);
// Before any layer file of step `step` is written (by one rank; the others wait for it): creates a
// fresh, empty partial_directory(root, step), removing one an interrupted save left; returns it.
std::string begin_checkpoint(const std::string& root, int64_t step);
// Writes one layer's tensors into the partial directory `step_dir` atomically (blocks until on disk).
// Throws h2::Error naming the file on an I/O error.
void write_layer(Stream& stream, const std::string& step_dir, int layer, int model_layers,
                 const std::vector<NamedTensor>& tensors);
// After every layer file is written into `partial_dir`: the manifest, the rename to a committed step
// directory, ROOT/latest, then the clean-up of ROOT (see the commit protocol above; keep >= 1).
// Returns the committed step directory.
std::string commit_checkpoint(const std::string& root, const std::string& partial_dir, const CheckpointState& state,
                              int model_layers, int keep);

// `path` is ROOT (its `latest` is used) or a step directory; returns the step directory. Throws
// h2::Error naming what is missing.
std::string find_checkpoint(const std::string& path);
CheckpointState read_manifest(const std::string& step_dir);
// Fills `tensors` (shapes must match: the error names the tensor and both shapes) from the layer file
// of `step_dir`, whose manifest `manifest` is; throws h2::Error naming the file when the manifest
// names another header hash for it (a file of another step or run), and naming the file and tensor
// when the data does not hash to its stored checksum.
void read_layer(Stream& stream, const std::string& step_dir, const CheckpointState& manifest, int layer,
                int model_layers, const std::vector<NamedTensor>& tensors);

}  // namespace h2::heteropp
