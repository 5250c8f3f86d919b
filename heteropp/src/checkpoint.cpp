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

#include "h2/error.hpp"

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

// Temporary file, fsync, rename over `path`, fsync of the directory: readers see the old content or
// the whole new one, and the rename survives a power cut.
void write_atomically(const std::string& path, const std::vector<std::string_view>& parts) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) io_error("create", temporary);
    for (std::string_view part : parts) out.write(part.data(), static_cast<std::streamsize>(part.size()));
    if (!out.flush()) io_error("write", temporary);
  }
  fsync_path(temporary, O_RDONLY);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) io_error("rename into place", path);
  fsync_path(fs::path(path).parent_path().string(), O_RDONLY | O_DIRECTORY);
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
  std::error_code ignored;
  fs::create_directories(step_dir, ignored);
  write_atomically((fs::path(step_dir) / layer_file_name(layer, model_layers)).string(),
                   {std::string_view(kMagic, sizeof kMagic),
                    std::string_view(reinterpret_cast<const char*>(&length), sizeof length), text, data});
}

void commit_checkpoint(const std::string& root, const std::string& step_dir, const CheckpointState& state,
                       int model_layers, int keep) {
  nlohmann::json layers = nlohmann::json::array();
  for (int layer = -1; layer <= model_layers; ++layer) {
    const std::string name = layer_file_name(layer, model_layers);
    if (!fs::exists(fs::path(step_dir) / name)) bad_checkpoint(step_dir + " lacks " + name + " at commit");
    layers.push_back(name);
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
  write_atomically((fs::path(step_dir) / kManifest).string(), {signed_manifest.dump(2) + "\n"});
  write_atomically((fs::path(root) / kLatest).string(), {fs::path(step_dir).filename().string() + "\n"});

  // Older checkpoints beyond `keep`, and incomplete directories left by an earlier crash.
  std::vector<fs::path> complete;
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step-", 0) != 0) continue;
    if (fs::exists(entry.path() / kManifest))
      complete.push_back(entry.path());
    else if (name < fs::path(step_dir).filename().string())
      fs::remove_all(entry.path(), error);
  }
  std::sort(complete.begin(), complete.end());
  const size_t keep_count = static_cast<size_t>(std::max(1, keep));
  for (size_t i = 0; i + keep_count < complete.size(); ++i) fs::remove_all(complete[i], error);
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
    j = nlohmann::json::parse(in);
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
    return s;
  } catch (const nlohmann::json::exception& e) {
    bad_checkpoint(path + ": " + e.what());
  }
}

void read_layer(Stream& stream, const std::string& step_dir, int layer, int model_layers,
                const std::vector<NamedTensor>& tensors) {
  const std::string path = (fs::path(step_dir) / layer_file_name(layer, model_layers)).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) io_error("open", path);
  char magic[sizeof kMagic];
  uint64_t length = 0;
  if (!in.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof kMagic) != 0 ||
      !in.read(reinterpret_cast<char*>(&length), sizeof length) || length > (1u << 26))
    bad_checkpoint(path + " is not an H2 layer file");
  std::string text(length, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length))) bad_checkpoint(path + " is truncated in its header");
  const std::streamoff data_start = in.tellg();
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
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
  }
}

}  // namespace h2::heteropp
