//===- AtomicFile.h - Trainer output that appears whole ---------*- C++ -*-===//
//
// Checkpoints and saved models are written to a temporary file beside their
// target, flushed to disk and renamed over it: a trainer killed at any moment
// leaves the previous file or the new one, never a mix, and a write error (a
// full disk) leaves the previous file intact, removes the temporary one and
// says why. The temporary name is fixed (PATH.tmp), so what a killed
// trainer left behind is overwritten by the next write. (The compiler's
// writeFileAtomically does the same; the runtime does not link the compiler's
// libraries.)
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_ATOMICFILE_H
#define MEMFIT_RUNTIME_ATOMICFILE_H

#include <cstddef>
#include <string>

namespace memfit::rt {

class AtomicFile {
public:
  /// Creates the temporary file; on failure `error()` says why.
  explicit AtomicFile(std::string path);
  ~AtomicFile(); // removes the temporary file unless committed
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// Appends; after the first failure further writes do nothing.
  void write(const void *data, size_t size);
  /// Flushes, renames over the target; false (and `error()`) on failure.
  bool commit();
  /// "PATH: cause" of the first failure, empty when none.
  const std::string &error() const { return err; }

private:
  void fail(const char *what, int errnum);
  std::string path, tmp, err;
  int fd = -1;
  bool committed = false;
};

} // namespace memfit::rt

#endif
