// Bootstrap through PMIx under a real launcher. `pmix_store_test --launch MPIRUN` starts three copies
// of itself with `MPIRUN -np 3`; each finds its rank through PMIx, rank 0 publishes the store's
// address and a fresh job token, and all of them use the store. Exit code 77 (meson's "skipped")
// when mpirun is missing or does not start its processes under PMIx.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "h2/dicomm/bootstrap.hpp"
#include "h2/dicomm/store.hpp"
#include "h2/error.hpp"

namespace {

using namespace std::chrono_literals;
using h2::dicomm::LaunchSource;
using h2::dicomm::RankInfo;
using h2::dicomm::Store;

constexpr int kRanks = 3;
constexpr int kSkip = 77;
constexpr const char* kSkipMarker = "H2_PMIX_SKIP:";
constexpr int kLaunchLimitSeconds = 90;

#define CHECK(cond)                                                                                                    \
  do {                                                                                                                 \
    if (!(cond)) {                                                                                                     \
      std::fprintf(stderr, "rank %s: %s:%d: check failed: %s\n", std::getenv("PMIX_RANK"), __FILE__, __LINE__, #cond); \
      return 1;                                                                                                        \
    }                                                                                                                  \
  } while (0)

int run_rank() {
  if (std::getenv("PMIX_RANK") == nullptr || std::getenv("PMIX_NAMESPACE") == nullptr) {
    std::printf("%s mpirun did not start this process under PMIx (PMIX_RANK/PMIX_NAMESPACE unset)\n", kSkipMarker);
    return kSkip;
  }
  RankInfo info = h2::dicomm::rank_info_from_environment();
  CHECK(info.source == LaunchSource::pmix);
  CHECK(info.rank == std::atoi(std::getenv("PMIX_RANK")));
  CHECK(info.world_size == kRanks);
  CHECK(info.local_world_size == kRanks);  // one node
  CHECK(info.local_rank == info.rank);
  CHECK(info.token.empty());  // H2_JOB_TOKEN is unset: rank 0 makes one up and publishes it

  auto store = Store::connect(info, 10s);
  CHECK(store->rank() == info.rank);
  store->set("rank/" + std::to_string(info.rank), "pid " + std::to_string(::getpid()));
  store->add("arrived", 1);
  store->barrier("all-set");
  for (int r = 0; r < kRanks; ++r) CHECK(store->get("rank/" + std::to_string(r)).starts_with("pid "));
  CHECK(store->get("arrived") == std::to_string(kRanks));

  if (info.rank == 1) {
    // The store is guarded by the token that went through PMIx: a guess is refused.
    std::string address = store->address();
    RankInfo guess = info;
    guess.source = LaunchSource::h2;
    guess.rank = 2;
    guess.master_addr = address.substr(0, address.rfind(':'));
    guess.master_port = std::stoi(address.substr(address.rfind(':') + 1));
    guess.token = "guessed";
    try {
      Store::connect(guess, 5s);
      CHECK(!"a wrong token was admitted");
    } catch (const h2::Error& e) {
      CHECK(std::strstr(e.what(), "wrong job token (H2_JOB_TOKEN)") != nullptr);
    }
  }
  store->barrier("done");
  store->close();
  std::printf("rank %d of %d: bootstrapped through PMIx, store at %s: ok\n", info.rank, info.world_size,
              store->address().c_str());
  return 0;
}

int launch(const std::string& mpirun, const char* self) {
  if (mpirun.empty() || ::access(mpirun.c_str(), X_OK) != 0) {
    std::printf("SKIP: mpirun not found (install openmpi-bin to run this test)\n");
    return kSkip;
  }
  int out[2];
  if (::pipe(out) != 0) return 1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::close(out[0]);
    ::close(out[1]);
    // The ranks must find PMIx, not a launcher variable inherited from whoever runs the test.
    for (const char* name : {"H2_RANK", "H2_WORLD_SIZE", "RANK", "WORLD_SIZE", "SLURM_PROCID", "H2_JOB_TOKEN",
                             "H2_MASTER_ADDR", "H2_MASTER_PORT"})
      ::unsetenv(name);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    std::string np = std::to_string(kRanks);
    std::vector<const char*> argv = {mpirun.c_str(),
                                     "--allow-run-as-root",
                                     "--oversubscribe",
                                     "--bind-to",
                                     "none",
                                     "-np",
                                     np.c_str(),
                                     "--mca",
                                     "btl",
                                     "self,tcp",
                                     self,
                                     "--rank",
                                     nullptr};
    ::execv(mpirun.c_str(), const_cast<char* const*>(argv.data()));
    std::fprintf(stderr, "cannot run %s: %s\n", mpirun.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string output;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kLaunchLimitSeconds);
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{out[0], POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    ssize_t n = ::read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    output.append(buffer, static_cast<size_t>(n));
    std::fwrite(buffer, 1, static_cast<size_t>(n), stdout);
    std::fflush(stdout);
  }
  ::close(out[0]);
  if (timed_out) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    std::printf("FAIL: mpirun did not finish within %d s\n", kLaunchLimitSeconds);
    return 1;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (output.find(kSkipMarker) != std::string::npos) {
    std::printf("SKIP: this mpirun does not provide PMIx to its processes\n");
    return kSkip;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("FAIL: mpirun exited with status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 1;
  }
  size_t ok = 0;
  for (size_t at = output.find(": ok"); at != std::string::npos; at = output.find(": ok", at + 1)) ++ok;
  if (ok != kRanks) {
    std::printf("FAIL: %zu of %d ranks reported ok\n", ok, kRanks);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 3 && std::string(argv[1]) == "--launch") {
      // argv[0] may be relative to a directory mpirun does not start in.
      char self[4096] = {};
      ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
      return launch(argv[2], n > 0 ? self : argv[0]);
    }
    if (argc == 2 && std::string(argv[1]) == "--rank") return run_rank();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "usage: %s --launch MPIRUN | --rank\n", argv[0]);
  return 2;
}
