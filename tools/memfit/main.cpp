//===- main.cpp - the memfit driver ---------------------------------------===//
//
// memfit <command> [options]: the commands register themselves (Command.h)
// and Driver.cpp dispatches; this file only sets up the process.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Driver.h"

#include "compiler/support/MemoryLimit.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // A model too large for this machine's memory ends in a message, not an
  // abort (compiler/support/MemoryLimit.h).
  memfit::installOutOfMemoryHandlers("memfit");
  return memfit::tool::runCommandLine(argc, argv);
}
