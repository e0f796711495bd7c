//===- Command.h - memfit subcommand registry -------------------*- C++ -*-===//
//
// Each subcommand lives in its own file with its own cl::SubCommand and
// flags, and registers a run function here. main() dispatches to the one the
// user named.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_COMMAND_H
#define MEMFIT_TOOLS_COMMAND_H

#include "compiler/support/Diagnostics.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace memfit::tool {

struct Command {
  llvm::cl::SubCommand *sub;
  int (*run)();
};

std::vector<Command> &commands();

struct RegisterCommand {
  RegisterCommand(llvm::cl::SubCommand &sub, int (*run)()) {
    commands().push_back({&sub, run});
  }
};

/// Prints `err` ("memfit: error: ...", or "memfit: internal error: ..." for
/// an InternalError) and returns its exit code: 2 when any part of it is
/// internal, else 1.
int reportError(llvm::Error err);

} // namespace memfit::tool

#endif
