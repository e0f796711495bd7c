//===- OutputDir.h - An output directory that appears whole -----*- C++ -*-===//
//
// Commands that write several files build them in a temporary directory
// beside the target and rename it into place at the end: the target appears
// whole or not at all, and a failure leaves nothing behind. An existing
// target is refused unless replacing is asked for; it is then swapped out
// only after the new one is complete. Of two commands writing one new
// target at once, the first to finish wins whole and the other fails
// cleanly. A failure to write (a full disk) says that the target was left as
// it was.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_SUPPORT_OUTPUTDIR_H
#define MEMFIT_COMPILER_SUPPORT_OUTPUTDIR_H

#include "llvm/Support/Error.h"

#include <string>

namespace memfit {

class OutputDir {
public:
  /// Creates the temporary directory beside `target`.
  static llvm::Expected<OutputDir> create(const std::string &target,
                                          bool replace);
  OutputDir(OutputDir &&other) noexcept;
  ~OutputDir(); // removes the temporary directory unless committed

  /// Writes `relPath` (no "..", not absolute) inside the directory.
  llvm::Error write(const std::string &relPath, const std::string &contents);
  llvm::Error copyFile(const std::string &from, const std::string &relPath);
  /// Moves the finished directory into place.
  llvm::Error commit();
  const std::string &tempPath() const { return temp; }

private:
  OutputDir(std::string target, std::string temp, bool replace)
      : target(std::move(target)), temp(std::move(temp)), replace(replace) {}
  std::string untouched() const;
  std::string target, temp;
  bool replace = false, committed = false;
};

} // namespace memfit

#endif
