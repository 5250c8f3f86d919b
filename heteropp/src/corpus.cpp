#include "h2/heteropp/corpus.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "h2/error.hpp"

namespace h2::heteropp {

ByteCorpus ByteCorpus::from_files(const std::vector<std::string>& paths, size_t min_bytes) {
  // The corpus is read into memory whole, on every rank that embeds or scores: only regular files
  // (`--data /dev/zero` was read until the kernel killed the ranks), and at most kMaxBytes together.
  constexpr uint64_t kMaxBytes = 8ull << 30;
  uint64_t total = 0;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error))
      throw Error(H2_STATUS_INVALID_ARGUMENT, "training data " + path + ": not a regular file");
    total += std::filesystem::file_size(path, error);
    if (error) throw Error(H2_STATUS_INVALID_ARGUMENT, "training data " + path + ": " + error.message());
  }
  if (total > kMaxBytes)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "training data: " + std::to_string(total) + " bytes in " +
                                                std::to_string(paths.size()) +
                                                " file(s), more than the 8 GiB this byte-level corpus holds in memory");
  ByteCorpus corpus;
  corpus.bytes_.reserve(total);
  for (const std::string& path : paths) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(H2_STATUS_INVALID_ARGUMENT, "training data " + path + ": cannot be read");
    corpus.bytes_.insert(corpus.bytes_.end(), std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    corpus.files_.push_back(path);
  }
  if (corpus.bytes_.size() < min_bytes)
    throw Error(H2_STATUS_INVALID_ARGUMENT, "training data: " + std::to_string(corpus.bytes_.size()) + " bytes in " +
                                                std::to_string(paths.size()) + " file(s), fewer than the " +
                                                std::to_string(min_bytes) + " one sample needs (seq_len + 1)");
  return corpus;
}

std::vector<std::string> ByteCorpus::default_files() {
  std::vector<std::string> files;
  const std::filesystem::path dir = "/usr/share/common-licenses";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void ByteCorpus::sample(uint64_t index, int64_t seq_len, uint64_t seed, std::vector<double>& inputs,
                        std::vector<double>& targets) const {
  const size_t window = static_cast<size_t>(seq_len) + 1;
  const size_t start = splitmix64(splitmix64(seed) ^ index) % (bytes_.size() - window + 1);
  inputs.resize(static_cast<size_t>(seq_len));
  targets.resize(static_cast<size_t>(seq_len));
  for (size_t i = 0; i < static_cast<size_t>(seq_len); ++i) {
    inputs[i] = bytes_[start + i];
    targets[i] = bytes_[start + i + 1];
  }
}

}  // namespace h2::heteropp
