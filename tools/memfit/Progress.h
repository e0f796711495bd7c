//===- Progress.h - Stage messages on stderr for long work ------*- C++ -*-===//
//
// Long work (large plans, many plans) says what it is doing on stderr, so a
// person waiting knows it is alive; stdout stays the command's result. A
// stage is announced under --verbose always, and otherwise only when the
// caller says it may take long; --quiet silences everything but errors.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_PROGRESS_H
#define MEMFIT_TOOLS_PROGRESS_H

#include "llvm/ADT/Twine.h"

#include <chrono>
#include <string>

namespace memfit::tool {

class Progress {
public:
  Progress(bool quiet, bool verbose) : quiet(quiet), verbose(verbose) {}

  /// Starts a stage; `long_` says it may take long for this input.
  void start(const llvm::Twine &stage, bool long_ = false);
  /// Ends the stage started last, with its time when it was announced.
  void done();
  /// A detail shown under --verbose only.
  void info(const llvm::Twine &text);

  bool isQuiet() const { return quiet; }
  bool isVerbose() const { return verbose; }

private:
  bool quiet, verbose;
  bool announced = false;
  std::string stage;
  std::chrono::steady_clock::time_point began;
};

} // namespace memfit::tool

#endif
