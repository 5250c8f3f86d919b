#include "strict_fault_handler.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace h2::cpu_reference {

namespace {

constexpr int kMaxRanges = 64;

struct Range {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<int> device{-1};
};

Range g_ranges[kMaxRanges];
std::mutex g_install_mutex;
bool g_installed = false;
struct sigaction g_previous;

// Only async-signal-safe calls below: write(2) and hand-made number formatting.
void write_text(const char* text) {
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void write_number(uintptr_t value, int base) {
  char digits[32];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value % static_cast<uintptr_t>(base)];
    value /= static_cast<uintptr_t>(base);
  } while (value != 0 && n < 32);
  char text[34];
  int k = 0;
  while (n > 0) text[k++] = digits[--n];
  text[k] = '\0';
  write_text(text);
}

void on_segfault(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Range& range : g_ranges) {
    const uintptr_t begin = range.begin.load(std::memory_order_acquire);
    if (begin != 0 && address >= begin && address < range.end.load(std::memory_order_acquire)) {
      write_text("h2 cpu-reference (strict mode): host code dereferenced device memory of device ");
      write_number(static_cast<uintptr_t>(range.device.load()), 10);
      write_text(" at 0x");
      write_number(address, 16);
      write_text(". Device pointers may only be passed to H2 calls; copy to host memory to read them.\n");
      break;
    }
  }
  // Hand the fault to whoever handled it before us (by default: terminate with SIGSEGV).
  sigaction(SIGSEGV, &g_previous, nullptr);
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signal, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(signal);
  }
  // Returning re-executes the faulting access under the previous (default) disposition.
}

}  // namespace

void register_device_range(const void* begin, size_t bytes, int device) {
  std::lock_guard lock(g_install_mutex);
  if (!g_installed) {
    struct sigaction action;
    std::memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segfault;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &g_previous);
    g_installed = true;
  }
  for (Range& range : g_ranges) {
    if (range.begin.load() == 0) {
      range.device.store(device);
      range.end.store(reinterpret_cast<uintptr_t>(begin) + bytes, std::memory_order_release);
      range.begin.store(reinterpret_cast<uintptr_t>(begin), std::memory_order_release);
      return;
    }
  }
}

void unregister_device_range(const void* begin) {
  std::lock_guard lock(g_install_mutex);
  for (Range& range : g_ranges) {
    if (range.begin.load() == reinterpret_cast<uintptr_t>(begin)) range.begin.store(0);
  }
}

}  // namespace h2::cpu_reference
