// Fault injection for the tests, preloaded into `h2 train` and its ranks (LD_PRELOAD): every call
// that makes a file durable or changes a directory (fsync, fdatasync, rename, unlink, remove, rmdir,
// mkdir and their *at forms) is a crash point, and the chosen one never happens: the process is
// killed (SIGKILL) just before it, as a power cut or the OOM killer would stop it there.
//   H2_CRASH_UNDER=DIR  only calls on paths under DIR count (the run's output)
//   H2_CRASH_LOG=FILE   every such call appends its point to FILE, one line each
//   H2_CRASH_AT=POINT   the process at POINT is killed before that call
// A point is "WHO CALL PATH #K": the K-th such call on PATH by the process WHO ("rank" plus its
// H2_RANK, or "launcher"). Not a count of all calls: two ranks race to make a directory both need,
// and the one that finds it made skips its mkdir, which would shift every later number. Counting by
// process (not by syscall, as `strace --inject` does) costs nothing between the calls (strace stops
// the process at every syscall and triples the run's time).
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace {

std::mutex mutex;
std::map<std::string, int>* occurrences = new std::map<std::string, int>;  // never freed: used until exit

std::string who() {
  const char* rank = std::getenv("H2_RANK");
  return rank != nullptr && *rank != '\0' ? std::string("rank") + rank : std::string("launcher");
}

std::string fd_path(int fd) {
  char link[PATH_MAX] = {};
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : proc;
}

// Logs this call's point; kills the process when it is the chosen one.
void crash_point(const char* call, const std::string& path) {
  if (const char* under = std::getenv("H2_CRASH_UNDER"); under != nullptr && path.rfind(under, 0) != 0) return;
  std::string point = who() + " " + call + " " + path;
  {
    std::lock_guard lock(mutex);
    point += " #" + std::to_string(++(*occurrences)[point]);
  }
  if (const char* log = std::getenv("H2_CRASH_LOG")) {
    const std::string line = point + "\n";
    const int fd = ::open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, line.data(), line.size());  // O_APPEND: whole lines from concurrent writers
      ::close(fd);
    }
  }
  if (const char* at = std::getenv("H2_CRASH_AT"); at != nullptr && point == at) ::kill(::getpid(), SIGKILL);
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_NEXT, name));
}

std::string at_path(int dirfd, const char* path) {
  return dirfd == AT_FDCWD || (path != nullptr && path[0] == '/') ? std::string(path) : fd_path(dirfd) + "/" + path;
}

}  // namespace

extern "C" {

int fsync(int fd) {
  crash_point("fsync", fd_path(fd));
  return real<int (*)(int)>("fsync")(fd);
}
int fdatasync(int fd) {
  crash_point("fdatasync", fd_path(fd));
  return real<int (*)(int)>("fdatasync")(fd);
}
int rename(const char* from, const char* to) {
  crash_point("rename", std::string(from) + " -> " + to);
  return real<int (*)(const char*, const char*)>("rename")(from, to);
}
int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  crash_point("renameat", at_path(from_dir, from) + " -> " + at_path(to_dir, to));
  return real<int (*)(int, const char*, int, const char*)>("renameat")(from_dir, from, to_dir, to);
}
int unlink(const char* path) {
  crash_point("unlink", path);
  return real<int (*)(const char*)>("unlink")(path);
}
int unlinkat(int dir, const char* path, int flags) {
  crash_point("unlinkat", at_path(dir, path));
  return real<int (*)(int, const char*, int)>("unlinkat")(dir, path, flags);
}
int remove(const char* path) {
  crash_point("remove", path);
  return real<int (*)(const char*)>("remove")(path);
}
int rmdir(const char* path) {
  crash_point("rmdir", path);
  return real<int (*)(const char*)>("rmdir")(path);
}
int mkdir(const char* path, mode_t mode) {
  crash_point("mkdir", path);
  return real<int (*)(const char*, mode_t)>("mkdir")(path, mode);
}
int mkdirat(int dir, const char* path, mode_t mode) {
  crash_point("mkdirat", at_path(dir, path));
  return real<int (*)(int, const char*, mode_t)>("mkdirat")(dir, path, mode);
}

}  // extern "C"
