//===- main.cpp - the memfit driver ---------------------------------------===//
//
// memfit <command> [options]: the commands register themselves (Command.h);
// this file only parses the command line and dispatches.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Command.h"
#include "tools/memfit/UnknownOptions.h"

#include "compiler/support/MemoryLimit.h"

#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {

std::vector<Command> &commands() {
  static std::vector<Command> all;
  return all;
}

int reportError(Error err) {
  int code = ExitUserError;
  handleAllErrors(
      std::move(err),
      [&](const InternalError &e) {
        // memfit's own bug, whatever failed beside it: exit code 2.
        code = ExitInternalError;
        WithColor(errs(), HighlightColor::Error) << "memfit: internal error: ";
        errs() << e.text() << " (please report this with the command line)\n";
      },
      [&](const ErrorInfoBase &e) {
        WithColor::error(errs(), "memfit") << e.message() << "\n";
      });
  return code;
}

} // namespace memfit::tool

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // A model too large for this machine's memory ends in a message, not an
  // abort (compiler/support/MemoryLimit.h).
  memfit::installOutOfMemoryHandlers("memfit");
  cl::SetVersionPrinter([](raw_ostream &os) { os << "memfit 0.1.0\n"; });
  // LLVM's libraries register hundreds of options of their own (targets,
  // passes); memfit's top level shows only --help and --version beside the
  // commands, and each command only its own options.
  cl::HideUnrelatedOptions(ArrayRef<const cl::OptionCategory *>{});
  if (auto unknown = memfit::tool::findUnknownOption(argc, argv)) {
    WithColor::error(errs(), "memfit") << *unknown << "\n";
    return memfit::tool::ExitUsage;
  }
  cl::ParseCommandLineOptions(
      argc, argv,
      "memfit: ahead-of-time memory planning for deep network training\n\n"
      "  memfit <command> --help   shows a command's options\n");
  for (const auto &cmd : memfit::tool::commands())
    if (*cmd.sub)
      return cmd.run();
  errs() << "memfit: error: no command given; try 'memfit --help'\n";
  return memfit::ExitUserError;
}
