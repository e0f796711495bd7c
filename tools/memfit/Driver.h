//===- Driver.h - memfit's command line, callable in-process ----*- C++ -*-===//
//
// The executable and the Python package run the same commands through one
// entry point, so a plan made from Python is the CLI's plan byte for byte.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_DRIVER_H
#define MEMFIT_TOOLS_DRIVER_H

namespace memfit::tool {

/// Parses `argv` (argv[0] the program's name, argv[1] the command) and runs
/// the command it names; returns the exit status the executable would. A
/// command line the parser refuses returns 1, as the parser's own exit
/// would. Once per process: llvm::cl's options keep what a parse set (the
/// Python module runs each command in a fork).
int runCommandLine(int argc, const char *const *argv);

/// What the last runCommandLine ended with, for callers that tell errors
/// apart by kind rather than by message (the Python package's exceptions).
enum class ErrorKind { None, User, Infeasible, Internal, Usage };
ErrorKind lastErrorKind();

} // namespace memfit::tool

#endif
