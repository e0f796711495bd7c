//===- NvmeStore.h - Optimizer state in a file on NVMe ----------*- C++ -*-===//
//
// The NVMe tier (docs/memory.md, "NVMe"): the optimizer state of weights
// whose plan homes it there lives in one file in the directory the user
// named, read and written by the host optimizer's threads in chunks as
// each weight's update runs.
//
// The file is unnamed: it is created and unlinked at once, so it never
// outlives the trainer, a SIGKILL included, and a stale one from an earlier
// run cannot be read as state. Checkpoints copy the state out (a resume
// writes it back), so the checkpoint, not this file, is what survives.
// Its whole size is reserved when it is opened (posix_fallocate, which
// reads back as zeros: Adam's and SGD's starting state), so a directory
// without the space fails at the start with a clear error, never in the
// middle of training because the disk filled.
//
// Reads and writes bypass the page cache (O_DIRECT) where the file system
// allows it, as state that is read once an iteration gains nothing from it
// and would evict what does; transfers are then multiples of kAlign at
// offsets and addresses aligned to it, which regionBytes and the host
// optimizer's chunking keep. Where O_DIRECT is refused (tmpfs), at open or
// at the first transfer, the file is used through the page cache.
//
// Thread-safe: positioned reads and writes of disjoint ranges. An I/O
// error does not throw (the optimizer's threads must not): the first one
// is kept, later transfers do nothing, and the trainer checks failed()
// where it waits for the host's updates.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_HOST_NVMESTORE_H
#define MEMFIT_RUNTIME_HOST_NVMESTORE_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace memfit::rt::host {

class NvmeStore {
public:
  /// O_DIRECT's alignment of offsets, sizes and buffers: 4 KiB covers the
  /// logical blocks of every NVMe drive and file system in use.
  static constexpr int64_t kAlign = 4096;
  /// Bytes a tensor of `bytes` takes in the file: rounded up to kAlign.
  static int64_t regionBytes(int64_t bytes) {
    return (bytes + kAlign - 1) / kAlign * kAlign;
  }

  /// Opens an unnamed file of `bytes` in `dir`, all of it reserved and
  /// zero. Null and `err` (which directory, what the system said, how much
  /// was asked) on failure.
  static std::unique_ptr<NvmeStore> open(const std::string &dir, int64_t bytes,
                                         std::string &err);
  ~NvmeStore();
  NvmeStore(const NvmeStore &) = delete;
  NvmeStore &operator=(const NvmeStore &) = delete;

  /// `bytes` at `offset` into `dst` / from `src`; with O_DIRECT all three
  /// must be kAlign-aligned (asserted). False once any transfer failed.
  bool read(int64_t offset, void *dst, int64_t bytes);
  bool write(int64_t offset, const void *src, int64_t bytes);

  bool failed() const { return failed_.load(); }
  /// The first failure, naming the directory and the system's reason.
  std::string error() const;
  bool direct() const { return direct_.load(); }
  int64_t size() const { return size_; }
  const std::string &directory() const { return dir_; }

private:
  NvmeStore(int fd, bool direct, int64_t size, std::string dir)
      : fd_(fd), direct_(direct), size_(size), dir_(std::move(dir)) {}
  void fail(const std::string &what);
  /// A file system that took O_DIRECT but refuses a direct transfer
  /// (EINVAL): the file goes through the page cache from then on.
  bool dropDirect();

  int fd_;
  std::atomic<bool> direct_;
  int64_t size_;
  std::string dir_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::string error_;
  /// Fault injection for the crash tests (MEMFIT_NVME_KILL_AT_WRITE=N): the
  /// Nth write stops the process with SIGKILL half-way through.
  std::atomic<int64_t> writes_{0};
  int64_t killAtWrite_ = 0;
};

/// A buffer aligned for NvmeStore's transfers, freed with std::free.
struct AlignedFree {
  void operator()(void *p) const;
};
using AlignedBuffer = std::unique_ptr<float[], AlignedFree>;
AlignedBuffer alignedFloats(int64_t count);

} // namespace memfit::rt::host

#endif
