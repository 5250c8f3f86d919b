// Writing a whole file so that a reader never sees part of it, and a failure (a full disk, a missing
// directory) is an h2::Error naming the file and the cause rather than an empty or cut file.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace h2 {

// Writes the concatenation of `parts` to `path`: into `path`.tmp beside it, then renamed over `path`,
// so that readers see the old file or the whole new one. `durable` also fsyncs the file before the
// rename and its directory after it, so that the new content survives a power cut (checkpoints).
// On failure the temporary is removed and h2::Error says "cannot write PATH: <strerror>". Blocks.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts,
                           bool durable = false);
inline void write_file_atomically(const std::string& path, std::string_view text, bool durable = false) {
  write_file_atomically(path, {text}, durable);
}

}  // namespace h2
