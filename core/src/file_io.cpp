#include "h2/file_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "h2/error.hpp"

namespace h2 {
namespace {

[[noreturn]] void cannot(const std::string& what, const std::string& path, int error) {
  throw Error(H2_STATUS_INTERNAL, "cannot " + what + " " + path + ": " + std::strerror(error));
}

void fsync_directory(const std::string& path) {
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) cannot("open", directory, errno);
  const int rc = ::fsync(fd), error = errno;
  ::close(fd);
  if (rc != 0) cannot("fsync", directory, error);
}

}  // namespace

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts, bool durable) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) cannot("write", path, errno);
  int error = 0;
  for (std::string_view part : parts) {
    while (!part.empty() && error == 0) {
      const ssize_t n = ::write(fd, part.data(), part.size());
      if (n < 0 && errno != EINTR) error = errno;
      if (n == 0) error = EIO;  // no progress and no error: do not spin
      if (n > 0) part.remove_prefix(static_cast<size_t>(n));
    }
  }
  if (error == 0 && durable && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;  // some file systems report a full disk only here
  if (error == 0 && std::rename(temporary.c_str(), path.c_str()) != 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    cannot("write", path, error);
  }
  if (durable) fsync_directory(path);
}

}  // namespace h2
