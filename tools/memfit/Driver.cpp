//===- Driver.cpp - memfit's command line, callable in-process ------------===//
//
// Dispatches to the command named on the command line (Command.h). Kept
// apart from main() so the Python package links it too.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/Driver.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/UnknownOptions.h"

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {

std::vector<Command> &commands() {
  static std::vector<Command> all;
  return all;
}

namespace {
ErrorKind lastKind = ErrorKind::None;
} // namespace

ErrorKind lastErrorKind() { return lastKind; }

int reportError(Error err) {
  int code = ExitUserError;
  ErrorKind kind = ErrorKind::User;
  handleAllErrors(
      std::move(err),
      [&](const InternalError &e) {
        // memfit's own bug, whatever failed beside it: exit code 2.
        code = ExitInternalError;
        kind = ErrorKind::Internal;
        WithColor(errs(), HighlightColor::Error) << "memfit: internal error: ";
        errs() << e.text() << " (please report this with the command line)\n";
      },
      [&](const ErrorInfoBase &e) {
        if (e.isA<Infeasible>() && kind != ErrorKind::Internal)
          kind = ErrorKind::Infeasible;
        WithColor::error(errs(), "memfit") << e.message() << "\n";
      });
  lastKind = kind;
  return code;
}

int runCommandLine(int argc, const char *const *argv) {
  static bool once = [] {
    cl::SetVersionPrinter([](raw_ostream &os) { os << "memfit 0.1.0\n"; });
    // LLVM's libraries register hundreds of options of their own (targets,
    // passes); memfit's top level shows only --help and --version beside
    // the commands, and each command only its own options.
    cl::HideUnrelatedOptions(ArrayRef<const cl::OptionCategory *>{});
    return true;
  }();
  (void)once;
  lastKind = ErrorKind::None;
  if (auto unknown = findUnknownOption(argc, argv)) {
    WithColor::error(errs(), "memfit") << *unknown << "\n";
    lastKind = ErrorKind::Usage;
    return ExitUsage;
  }
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "memfit: ahead-of-time memory planning for deep network training\n\n"
          "  memfit <command> --help   shows a command's options\n",
          &errs())) {
    lastKind = ErrorKind::Usage;
    return ExitUserError; // as the parser's own exit(1)
  }
  for (const auto &cmd : commands())
    if (*cmd.sub)
      return cmd.run();
  errs() << "memfit: error: no command given; try 'memfit --help'\n";
  lastKind = ErrorKind::Usage;
  return ExitUserError;
}

} // namespace memfit::tool
