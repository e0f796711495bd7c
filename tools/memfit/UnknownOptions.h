//===- UnknownOptions.h - refuse options memfit does not know ---*- C++ -*-===//
//
// LLVM's parser reads an unknown option that begins with a letter of a
// one-letter option as that option (`--host-budget` as `-h`, so the help
// printed and memfit exited 0), and otherwise exits 1 beside other
// complaints. memfit checks the command line first: an option the named
// command does not have is refused naming it and the nearest one it has.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_UNKNOWNOPTIONS_H
#define MEMFIT_TOOLS_UNKNOWNOPTIONS_H

#include <optional>
#include <string>

namespace memfit::tool {

/// Exit status of a command line memfit cannot read (an unknown option).
inline constexpr int ExitUsage = 2;

/// The message for the first option in argv[1..argc) that the command it
/// names (or memfit itself, when argv[1] names none) does not accept, or
/// nothing when every option is known. Values of options that take one and
/// everything after `--` are not options.
std::optional<std::string> findUnknownOption(int argc, const char *const *argv);

} // namespace memfit::tool

#endif
