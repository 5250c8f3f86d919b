#include "h2/heteropp/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "h2/error.hpp"
#include "h2/file_io.hpp"
#include "h2/heteroauto/description.hpp"

namespace h2::heteropp {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'H', '2', 'C', 'K', 'P', 'T', '0', '1'};
constexpr const char* kManifest = "manifest.json";
constexpr const char* kLatest = "latest";

[[noreturn]] void io_error(const std::string& what, const std::string& path) {
  throw Error(H2_STATUS_INTERNAL, "checkpoint: cannot " + what + " " + path + ": " + std::strerror(errno));
}

[[noreturn]] void bad_checkpoint(const std::string& message) {
  throw Error(H2_STATUS_INVALID_ARGUMENT, "checkpoint: " + message);
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) io_error("open", path);
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) io_error("fsync", path);
}

void require_f32_contiguous(const NamedTensor& t) {
  if (!t.tensor.defined() || t.tensor.dtype() != DType::f32 || !t.tensor.is_contiguous())
    throw Error(H2_STATUS_INVALID_ARGUMENT, "checkpoint: tensor " + t.name + " must be a contiguous f32 tensor");
}

// A tensor's data as stored, XXH3-64 in hex: reading checks it, so a damaged file is refused by name
// instead of resuming from wrong weights. XXH3 hashes at memory speed (tens of GB/s), which a
// checkpoint of a large model needs; a CRC would add seconds per GiB.
std::string checksum(const char* data, size_t bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(data, bytes)));
  return hex;
}

// The manifest's own hash: of its compact dump without the "xxh3" field (nlohmann's objects keep
// their keys sorted, so the dump is the same on every read), so that a damaged step count or data
// position is refused rather than resumed from.
std::string manifest_checksum(nlohmann::json manifest) {
  manifest.erase("xxh3");
  const std::string text = manifest.dump();
  return checksum(text.data(), text.size());
}

// A layer file's JSON header text, as stored; `data_start` is set to where its data begins.
std::string read_layer_header(std::ifstream& in, const std::string& path) {
  char magic[sizeof kMagic];
  uint64_t length = 0;
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 ||
      !in.read(reinterpret_cast<char*>(&length), sizeof length) || length > (1u << 26))
    bad_checkpoint(path + " is not an H2 layer file");
  std::string text(length, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length))) bad_checkpoint(path + " is truncated in its header");
  return text;
}

// The step number of a ROOT entry named "step-000120", "step-000120.2" or "step-000120.partial";
// -1 for any other name.
int64_t step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0) return -1;
  const size_t end = name.find('.', 5);
  const std::string digits = name.substr(5, end == std::string::npos ? std::string::npos : end - 5);
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return -1;
  return std::stoll(digits);
}

size_t tensor_bytes(const Tensor& t) {
  return static_cast<size_t>(t.numel()) * sizeof(float);
}
size_t tensor_offset(const Tensor& t) {
  return static_cast<size_t>(t.offset()) * sizeof(float);
}

}  // namespace

std::string layer_file_name(int layer, int model_layers) {
  if (layer < 0) return "layer-embedding.bin";
  if (layer >= model_layers) return "layer-head.bin";
  char name[32];
  std::snprintf(name, sizeof name, "layer-block-%04d.bin", layer);
  return name;
}

std::string step_directory(const std::string& root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%06lld", static_cast<long long>(step));
  return (fs::path(root) / name).string();
}

void write_layer(Stream& stream, const std::string& step_dir, int layer, int model_layers,
                 const std::vector<NamedTensor>& tensors) {
  size_t total = 0;
  for (const NamedTensor& t : tensors) {
    require_f32_contiguous(t);
    total += tensor_bytes(t.tensor);
  }
  std::string data(total, '\0');
  size_t at = 0;
  for (const NamedTensor& t : tensors) {
    stream.copy_to_host(data.data() + at, *t.tensor.buffer(), tensor_bytes(t.tensor), tensor_offset(t.tensor));
    at += tensor_bytes(t.tensor);
  }
  stream.synchronize();
  nlohmann::json header = {{"layer", layer}, {"tensors", nlohmann::json::array()}};
  at = 0;
  for (const NamedTensor& t : tensors) {
    header["tensors"].push_back({{"name", t.name},
                                 {"shape", t.tensor.shape()},
                                 {"dtype", "f32"},
                                 {"offset", at},
                                 {"bytes", tensor_bytes(t.tensor)},
                                 {"xxh3", checksum(data.data() + at, tensor_bytes(t.tensor))}});
    at += tensor_bytes(t.tensor);
  }
  const std::string text = header.dump();
  const uint64_t length = text.size();
  if (fs::exists(fs::path(step_dir) / kManifest))
    throw Error(H2_STATUS_INVALID_ARGUMENT, "checkpoint: " + step_dir + " is committed and is never written again");
  write_file_atomically((fs::path(step_dir) / layer_file_name(layer, model_layers)).string(),
                        {std::string_view(kMagic, sizeof kMagic),
                         std::string_view(reinterpret_cast<const char*>(&length), sizeof length), text, data},
                        true);
}

std::string partial_directory(const std::string& root, int64_t step) {
  return step_directory(root, step) + ".partial";
}

std::string begin_checkpoint(const std::string& root, int64_t step) {
  const std::string partial = partial_directory(root, step);
  std::error_code error;
  fs::remove_all(partial, error);
  if (error) throw Error(H2_STATUS_INTERNAL, "checkpoint: cannot remove " + partial + ": " + error.message());
  fs::create_directories(partial, error);
  if (error) throw Error(H2_STATUS_INTERNAL, "checkpoint: cannot create " + partial + ": " + error.message());
  return partial;
}

std::string commit_checkpoint(const std::string& root, const std::string& partial_dir, const CheckpointState& state,
                              int model_layers, int keep) {
  nlohmann::json layers = nlohmann::json::array();
  for (int layer = -1; layer <= model_layers; ++layer) {
    const std::string name = layer_file_name(layer, model_layers);
    const std::string path = (fs::path(partial_dir) / name).string();
    std::ifstream in(path, std::ios::binary);
    if (!in) bad_checkpoint(partial_dir + " lacks " + name + " at commit");
    const std::string header = read_layer_header(in, path);
    layers.push_back({{"file", name}, {"header_xxh3", checksum(header.data(), header.size())}});
  }
  const nlohmann::json manifest = {
      {"format", "h2-checkpoint"},
      {"version", 1},
      {"step", state.step},
      {"optimizer_steps", state.optimizer_steps},
      {"samples", state.samples},
      {"loss_scale", state.loss_scale},
      {"good_steps", state.good_steps},
      {"seed", state.seed},
      {"model", state.model},
      {"data_files", state.data_files},
      {"layers", layers},
      {"plan", state.plan},
  };
  nlohmann::json signed_manifest = manifest;
  signed_manifest["xxh3"] = manifest_checksum(manifest);
  write_file_atomically((fs::path(partial_dir) / kManifest).string(), signed_manifest.dump(2) + "\n", true);

  // A committed directory is never written again: take the step's name, or the next free variant.
  std::string committed = step_directory(root, state.step);
  std::error_code exists_error;
  for (int n = 2; fs::exists(committed, exists_error); ++n)
    committed = step_directory(root, state.step) + "." + std::to_string(n);
  if (std::rename(partial_dir.c_str(), committed.c_str()) != 0) io_error("rename " + partial_dir + " to", committed);
  fsync_path(root, O_RDONLY | O_DIRECTORY);
  const std::string committed_name = fs::path(committed).filename().string();
  write_file_atomically((fs::path(root) / kLatest).string(), committed_name + "\n", true);

  // One history in ROOT: no partial directories, nothing of this step or later but this commit, and
  // the newest `keep` committed checkpoints.
  std::vector<std::pair<int64_t, fs::path>> older;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    const int64_t step = step_of(name);
    if (!entry.is_directory(error) || step < 0 || name == committed_name) continue;
    // A partial directory goes even with its manifest (a save that stopped before its rename).
    if (name.ends_with(".partial") || !fs::exists(entry.path() / kManifest, error) || step >= state.step)
      fs::remove_all(entry.path(), error);
    else
      older.emplace_back(step, entry.path());
  }
  std::sort(older.begin(), older.end());
  const size_t keep_older = static_cast<size_t>(std::max(1, keep)) - 1;
  for (size_t i = 0; i + keep_older < older.size(); ++i) fs::remove_all(older[i].second, error);
  return committed;
}

std::string find_checkpoint(const std::string& path) {
  if (!fs::exists(path)) bad_checkpoint(path + " does not exist");
  if (fs::exists(fs::path(path) / kManifest)) return path;
  std::ifstream latest(fs::path(path) / kLatest);
  std::string name;
  if (!(latest >> name))
    bad_checkpoint(path + " is neither a checkpoint step directory (no " + kManifest + ") nor a checkpoint root (no " +
                   kLatest + ")");
  const fs::path step_dir = fs::path(path) / name;
  if (!fs::exists(step_dir / kManifest))
    bad_checkpoint(step_dir.string() + ", named by " + path + "/latest, has no manifest");
  return step_dir.string();
}

CheckpointState read_manifest(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kManifest).string();
  std::ifstream in(path);
  if (!in) io_error("read", path);
  nlohmann::json j;
  try {
    j = heteroauto::parse_json_bounded(in);
    if (j.value("format", "") != "h2-checkpoint" || j.value("version", 0) != 1)
      bad_checkpoint(path + " is not an h2-checkpoint of version 1");
    // Manifests written before checksums have none.
    if (j.contains("xxh3")) {
      const std::string stored = j.at("xxh3").get<std::string>(), read = manifest_checksum(j);
      if (stored != read)
        bad_checkpoint(path + " is damaged: its content hashes to " + read + ", not the " + stored +
                       " it was written with (edited on purpose? delete its \"xxh3\" line)");
    }
    CheckpointState s;
    s.step = j.at("step").get<int64_t>();
    s.optimizer_steps = j.at("optimizer_steps").get<int64_t>();
    s.samples = j.at("samples").get<int64_t>();
    s.loss_scale = j.at("loss_scale").get<double>();
    s.good_steps = j.at("good_steps").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.model = j.at("model");
    s.data_files = j.at("data_files").get<std::vector<std::string>>();
    s.plan = j.value("plan", nlohmann::json());
    // Manifests written before layer files were named with their header hashes list names only.
    for (const nlohmann::json& layer : j.value("layers", nlohmann::json::array()))
      if (layer.is_object())
        s.layer_headers[layer.at("file").get<std::string>()] = layer.at("header_xxh3").get<std::string>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    bad_checkpoint(path + ": " + e.what());
  } catch (const std::length_error& e) {
    bad_checkpoint(path + ": " + e.what());
  }
}

void read_layer(Stream& stream, const std::string& step_dir, const CheckpointState& manifest, int layer,
                int model_layers, const std::vector<NamedTensor>& tensors) {
  const std::string name = layer_file_name(layer, model_layers);
  const std::string path = (fs::path(step_dir) / name).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("open", path);
  const std::string text = read_layer_header(in, path);
  if (!manifest.layer_headers.empty()) {
    const auto expected = manifest.layer_headers.find(name);
    if (expected == manifest.layer_headers.end()) bad_checkpoint(step_dir + "'s manifest does not name " + name);
    const std::string found = checksum(text.data(), text.size());
    if (found != expected->second)
      bad_checkpoint(path + " is not the file its manifest names: its header hashes to " + found + ", not " +
                     expected->second + " (a layer file of another step or run?)");
  }
  const std::streamoff data_start = in.tellg();
  nlohmann::json header;
  try {
    std::istringstream header_text(text);
    header = heteroauto::parse_json_bounded(header_text);
    for (const NamedTensor& t : tensors) {
      require_f32_contiguous(t);
      const auto& entries = header.at("tensors");
      const auto found =
          std::find_if(entries.begin(), entries.end(), [&](const nlohmann::json& e) { return e.at("name") == t.name; });
      if (found == entries.end()) bad_checkpoint(path + " has no tensor " + t.name);
      const Shape shape = found->at("shape").get<Shape>();
      if (shape != t.tensor.shape())
        bad_checkpoint(path + ": " + t.name + " is " + shape_string(shape) + " there but " +
                       shape_string(t.tensor.shape()) + " in this model");
      std::string data(tensor_bytes(t.tensor), '\0');
      in.seekg(data_start + static_cast<std::streamoff>(found->at("offset").get<uint64_t>()));
      if (!in.read(data.data(), static_cast<std::streamsize>(data.size())))
        bad_checkpoint(path + " is truncated in " + t.name);
      // Files written before checksums have none.
      if (found->contains("xxh3")) {
        const std::string stored = found->at("xxh3").get<std::string>(), read = checksum(data.data(), data.size());
        if (stored != read)
          bad_checkpoint(path + " is damaged: the data of " + t.name + " hashes to " + read + ", not the " + stored +
                         " it was written with");
      }
      stream.copy_from_host(*t.tensor.buffer(), data.data(), data.size(), tensor_offset(t.tensor));
      stream.synchronize();  // `data` dies at the end of this iteration
    }
  } catch (const nlohmann::json::exception& e) {
    bad_checkpoint(path + ": " + e.what());
  } catch (const std::length_error& e) {
    bad_checkpoint(path + ": " + e.what());
  }
}

}  // namespace h2::heteropp
