//===- main.cpp - the memfit driver ---------------------------------------===//
//
// memfit <command> [options]: the commands register themselves (Command.h);
// this file only parses the command line and dispatches.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Command.h"

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
  handleAllErrors(std::move(err), [&](const ErrorInfoBase &e) {
    std::string msg = e.message();
    // Internal errors are memfit's bugs, not the user's: exit code 2.
    if (msg.rfind("internal", 0) == 0 ||
        msg.find("plan verification failed") != std::string::npos)
      code = ExitInternalError;
    WithColor::error(errs(), "memfit") << msg << "\n";
  });
  return code;
}

} // namespace memfit::tool

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) { os << "memfit 0.1.0\n"; });
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
