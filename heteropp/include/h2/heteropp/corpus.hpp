// Training data: byte-level tokens (vocabulary 256) from text files. By default the license texts
// every Debian machine has under /usr/share/common-licenses, so the main job needs no download.
//
// The order is deterministic and independent of the parallel layout: sample i of the run is a
// window at a position drawn from (seed, i) only, and step s uses samples [s·B, (s+1)·B) of the
// global batch B, however they are split over replicas and micro-batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace h2::heteropp {

class ByteCorpus {
 public:
  // Reads and concatenates the files (in the given order). Throws h2::Error naming a file that
  // cannot be read, or when all of them together are shorter than `min_bytes`.
  static ByteCorpus from_files(const std::vector<std::string>& paths, size_t min_bytes);
  // The regular files directly under /usr/share/common-licenses, in name order.
  static std::vector<std::string> default_files();

  size_t size() const { return bytes_.size(); }
  const std::vector<std::string>& files() const { return files_; }

  // Sample `index`: seq_len input tokens and the seq_len tokens that follow each of them.
  void sample(uint64_t index, int64_t seq_len, uint64_t seed, std::vector<double>& inputs,
              std::vector<double>& targets) const;

 private:
  std::vector<unsigned char> bytes_;
  std::vector<std::string> files_;
};

}  // namespace h2::heteropp
