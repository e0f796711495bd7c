//===- MemoryLimit.cpp - Refusing work that does not fit in memory --------===//
#include "compiler/support/MemoryLimit.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <fstream>
#include <new>
#include <sstream>
#include <sys/resource.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace memfit {

namespace {

/// MemAvailable from /proc/meminfo, in bytes; UINT64_MAX when unknown.
uint64_t memAvailable() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit)
    if (key == "MemAvailable:")
      return kib * 1024;
  return UINT64_MAX;
}

/// This process's virtual size, in bytes (what RLIMIT_AS counts).
uint64_t virtualSize() {
  std::ifstream f("/proc/self/statm");
  uint64_t pages = 0;
  if (!(f >> pages))
    return 0;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

const char *oomTool = "memfit";

/// The first number after `key` in the file at `path`, read without
/// allocating; 0 when absent.
uint64_t rawNumber(const char *path, const char *key) {
  char buf[4096];
  int fd = ::open(path, O_RDONLY);
  if (fd < 0)
    return 0;
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *at = key[0] ? std::strstr(buf, key) : buf;
  if (!at)
    return 0;
  at += std::strlen(key);
  while (*at == ' ' || *at == '\t')
    ++at;
  return std::strtoull(at, nullptr, 10);
}

/// Prints the refusal and exits, allocating nothing: the allocator is what
/// failed, and a handler that allocates fails again inside itself (seen
/// under ulimit -v as a recursion until the stack ran out).
[[noreturn]] void outOfMemory(const char *what) {
  static volatile sig_atomic_t entered = 0;
  char buf[512];
  if (entered) {
    std::snprintf(buf, sizeof buf, "%s: error: out of memory\n", oomTool);
    (void)!::write(2, buf, std::strlen(buf));
    std::_Exit(ExitUserError);
  }
  entered = 1;
  double mib = -1;
  const char *source = "MemAvailable of this machine";
  if (uint64_t kib = rawNumber("/proc/meminfo", "MemAvailable:"))
    mib = double(kib) / 1024.0;
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t used = rawNumber("/proc/self/statm", "") *
                    static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    double room =
        rl.rlim_cur > used ? double(rl.rlim_cur - used) / 1048576.0 : 0.0;
    if (mib < 0 || room < mib) {
      mib = room;
      source = "room left under the address-space limit (ulimit -v)";
    }
  }
  if (mib < 0)
    std::snprintf(buf, sizeof buf, "%s: error: out of memory (%s)\n", oomTool,
                  what);
  else
    std::snprintf(buf, sizeof buf,
                  "%s: error: out of memory (%s); %.1f MiB available (%s)\n",
                  oomTool, what, mib, source);
  // No stdio buffers: allocating may be what failed.
  (void)!::write(2, buf, std::strlen(buf));
  std::_Exit(ExitUserError);
}

void onTerminate() {
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::bad_alloc &) {
      outOfMemory("an allocation failed");
    } catch (const std::system_error &s) {
      if (s.code() == std::errc::resource_unavailable_try_again ||
          s.code() == std::errc::not_enough_memory)
        outOfMemory("cannot start a thread");
    } catch (...) {
    }
  }
  std::abort(); // anything else is a bug: keep the crash and its stack
}

} // namespace

AvailableMemory availableMemory() {
  AvailableMemory m;
  uint64_t avail = memAvailable();
  if (avail != UINT64_MAX) {
    m.bytes = avail;
    m.source = "MemAvailable of this machine";
  }
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t used = virtualSize();
    uint64_t room = rl.rlim_cur > used ? rl.rlim_cur - used : 0;
    if (room < m.bytes) {
      m.bytes = room;
      m.source = "room left under the address-space limit (ulimit -v) of " +
                 formatBytes(static_cast<int64_t>(rl.rlim_cur));
    }
  }
  return m;
}

uint64_t planningMemoryEstimate(uint64_t tasks) { return tasks * 9 * 1024; }

llvm::Error checkPlanningMemory(uint64_t tasks, const std::string &model) {
  uint64_t need = planningMemoryEstimate(tasks);
  AvailableMemory m = availableMemory();
  // Under an address-space limit, every thread's malloc arena reserves
  // 64 MiB of it whatever it uses, and the planner's search runs a thread
  // per core.
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    need += (uint64_t(64) << 20) *
            std::max(1u, std::thread::hardware_concurrency());
  if (m.bytes == UINT64_MAX || need <= m.bytes)
    return llvm::Error::success();
  return makeErrorF(
      "{0}: too large to plan in this machine's memory: planning {1} tasks "
      "needs about {2} (an estimate), and {3} is available ({4})",
      model, tasks, formatBytes(static_cast<int64_t>(need)),
      formatBytes(static_cast<int64_t>(m.bytes)), m.source);
}

void installOutOfMemoryHandlers(const char *tool) {
  oomTool = tool;
  std::set_terminate(onTerminate);
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { outOfMemory(reason); });
}

} // namespace memfit
