//===- NvmeStore.cpp - Optimizer state in a file on NVMe ------------------===//
#include "runtime/host/NvmeStore.h"

#include <cassert>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <vector>

namespace memfit::rt::host {

namespace {

std::string gib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1 << 30));
  return buf;
}

/// " (N free)" for `dir`, or "" where the system does not say.
std::string freeSpace(const std::string &dir) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0)
    return "";
  return " (" + gib(int64_t(st.f_bavail) * int64_t(st.f_frsize)) + " free)";
}

} // namespace

void AlignedFree::operator()(void *p) const { std::free(p); }

AlignedBuffer alignedFloats(int64_t count) {
  size_t bytes = static_cast<size_t>(
      NvmeStore::regionBytes(std::max<int64_t>(count, 1) * 4));
  void *p = std::aligned_alloc(NvmeStore::kAlign, bytes);
  if (!p)
    std::abort(); // as operator new would, without throwing on a pool thread
  return AlignedBuffer(static_cast<float *>(p));
}

std::unique_ptr<NvmeStore> NvmeStore::open(const std::string &dir,
                                           int64_t bytes, std::string &err) {
  // A file size limit (ulimit -f) must read as an error, not end the
  // trainer before it can say why.
  std::signal(SIGXFSZ, SIG_IGN);
  std::string templ = dir + "/.memfit-nvme-state-XXXXXX";
  std::vector<char> path(templ.begin(), templ.end());
  path.push_back('\0');
  int fd = mkstemp(path.data());
  if (fd < 0) {
    err = "cannot create the NVMe state file in " + dir + ": " +
          std::strerror(errno);
    return nullptr;
  }
  // Unnamed from here on: it goes when the trainer does, however it ends.
  unlink(path.data());
  if (bytes > 0) {
    if (int e = posix_fallocate(fd, 0, bytes); e != 0) {
      err = dir + " lacks the space for " + gib(bytes) +
            " of optimizer state the plan keeps on NVMe" + freeSpace(dir) +
            ": " + std::strerror(e);
      close(fd);
      return nullptr;
    }
  }
  bool direct = false;
#ifdef O_DIRECT
  int flags = fcntl(fd, F_GETFL);
  direct = flags >= 0 && fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
#endif
  std::unique_ptr<NvmeStore> s(new NvmeStore(fd, direct, bytes, dir));
  if (const char *k = std::getenv("MEMFIT_NVME_KILL_AT_WRITE"); k && *k)
    s->killAtWrite_ = std::atoll(k);
  return s;
}

NvmeStore::~NvmeStore() { close(fd_); }

bool NvmeStore::dropDirect() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!direct_)
    return true; // another thread did
#ifdef O_DIRECT
  int flags = fcntl(fd_, F_GETFL);
  if (flags < 0 || fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0)
    return false;
#endif
  direct_ = false;
  return true;
}

void NvmeStore::fail(const std::string &what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.exchange(true))
    error_ = what;
}

std::string NvmeStore::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

bool NvmeStore::read(int64_t offset, void *dst, int64_t bytes) {
  assert(offset >= 0 && offset + bytes <= size_ && "a read leaves the file");
  assert((!direct_ || (offset % kAlign == 0 && bytes % kAlign == 0 &&
                       reinterpret_cast<uintptr_t>(dst) % kAlign == 0)) &&
         "an unaligned direct read");
  char *p = static_cast<char *>(dst);
  while (bytes > 0 && !failed_) {
    ssize_t n = pread(fd_, p, static_cast<size_t>(bytes), offset);
    if (n < 0 &&
        (errno == EINTR || (errno == EINVAL && direct_ && dropDirect())))
      continue;
    if (n <= 0) {
      fail("reading optimizer state from " + dir_ + ": " +
           (n < 0 ? std::strerror(errno) : "the file ended early"));
      break;
    }
    p += n;
    offset += n;
    bytes -= n;
  }
  return !failed_;
}

bool NvmeStore::write(int64_t offset, const void *src, int64_t bytes) {
  assert(offset >= 0 && offset + bytes <= size_ && "a write leaves the file");
  assert((!direct_ || (offset % kAlign == 0 && bytes % kAlign == 0 &&
                       reinterpret_cast<uintptr_t>(src) % kAlign == 0)) &&
         "an unaligned direct write");
  if (killAtWrite_ > 0 && ++writes_ == killAtWrite_) {
    // Half the transfer, then the process dies as a power cut or the OOM
    // killer would leave it.
    int64_t half = bytes / 2 / kAlign * kAlign;
    if (half > 0 && pwrite(fd_, src, static_cast<size_t>(half), offset) < 0)
      std::abort();
    std::raise(SIGKILL);
  }
  const char *p = static_cast<const char *>(src);
  while (bytes > 0 && !failed_) {
    ssize_t n = pwrite(fd_, p, static_cast<size_t>(bytes), offset);
    if (n < 0 &&
        (errno == EINTR || (errno == EINVAL && direct_ && dropDirect())))
      continue;
    if (n <= 0) {
      fail("writing optimizer state to " + dir_ + ": " +
           (n < 0 ? std::strerror(errno) : "nothing was written"));
      break;
    }
    p += n;
    offset += n;
    bytes -= n;
  }
  return !failed_;
}

} // namespace memfit::rt::host
