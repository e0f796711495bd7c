//===- Progress.cpp - Stage messages on stderr for long work --------------===//
#include "tools/memfit/Progress.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace memfit::tool {

void Progress::start(const llvm::Twine &what, bool long_) {
  stage = what.str();
  began = std::chrono::steady_clock::now();
  announced = !quiet && (verbose || long_);
  if (announced)
    llvm::errs() << "memfit: " << stage << "...\n";
}

void Progress::done() {
  if (!announced)
    return;
  std::chrono::duration<double> secs = std::chrono::steady_clock::now() - began;
  llvm::errs() << llvm::formatv("memfit: {0}: done in {1:F2} s\n", stage,
                                secs.count());
  announced = false;
}

void Progress::info(const llvm::Twine &text) {
  if (verbose && !quiet)
    llvm::errs() << "memfit: " << text << "\n";
}

} // namespace memfit::tool
