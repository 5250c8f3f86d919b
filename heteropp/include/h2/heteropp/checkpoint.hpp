// Checkpoints stored per layer, not per stage, so that a run may resume under another plan (other
// devices, another layer split): whichever rank holds a layer then reads that layer's file.
//
// Layout of ROOT (`h2 train --out DIR` writes ROOT = DIR/checkpoints):
//   ROOT/step-000120/layer-embedding.bin, layer-block-0000.bin, ..., layer-head.bin
//   ROOT/step-000120/manifest.json     written last: a step directory without one is incomplete;
//                                      its "xxh3" hashes the rest of it (compact dump), checked on read
//   ROOT/latest                        the name of the newest complete step directory
// Every file is written to a temporary name, fsync'ed, renamed into place and its directory
// fsync'ed, so a crash at any moment leaves the previous checkpoint whole and `latest` naming it.
//
// A layer file: the 8 bytes "H2CKPT01", a little-endian uint64 header length, a JSON header
// {"layer", "tensors": [{"name", "shape", "dtype": "f32", "offset", "bytes", "xxh3"}]}, then the raw
// data. "xxh3" is the tensor's data hashed with XXH3-64 (16 hex digits); reading refuses a tensor
// whose data hash differs, naming the file and the tensor.
#pragma once

#include <cstdint>
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
};

// "layer-block-0003.bin"; layer -1 is "layer-embedding.bin", layer == model_layers "layer-head.bin".
std::string layer_file_name(int layer, int model_layers);
// ROOT/step-000120
std::string step_directory(const std::string& root, int64_t step);

// Writes one layer's tensors to `step_dir` atomically (blocks until on disk). Throws h2::Error naming
// the file on an I/O error.
void write_layer(Stream& stream, const std::string& step_dir, int layer, int model_layers,
                 const std::vector<NamedTensor>& tensors);
// After every layer file is written: the manifest, then ROOT/latest; then removes complete step
// directories older than the newest `keep` (keep >= 1) and incomplete ones older than this step.
void commit_checkpoint(const std::string& root, const std::string& step_dir, const CheckpointState& state,
                       int model_layers, int keep);

// `path` is ROOT (its `latest` is used) or a step directory; returns the step directory. Throws
// h2::Error naming what is missing.
std::string find_checkpoint(const std::string& path);
CheckpointState read_manifest(const std::string& step_dir);
// Fills `tensors` (shapes must match: the error names the tensor and both shapes) from the layer file;
// throws h2::Error naming the file and tensor when the data does not hash to its stored checksum.
void read_layer(Stream& stream, const std::string& step_dir, int layer, int model_layers,
                const std::vector<NamedTensor>& tensors);

}  // namespace h2::heteropp
