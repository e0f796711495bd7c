//===- UnknownOptions.cpp - refuse options memfit does not know -----------===//
//
// Reads argv the way llvm::cl does (`-x` and `--x` alike, `--x=v`, a
// separate value for an option that requires one) but accepts only the
// exact names of the command's own options, so no unknown option reaches
// the parser's prefix and grouping rules.
//
//===----------------------------------------------------------------------===//
#include "tools/memfit/UnknownOptions.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

using namespace llvm;

namespace memfit::tool {

namespace {

/// The command argv[1] names, or the top level.
cl::SubCommand &namedCommand(int argc, const char *const *argv) {
  if (argc > 1)
    for (cl::SubCommand *sub : cl::getRegisteredSubcommands())
      if (sub != &*cl::TopLevelSubCommand && sub != &*cl::AllSubCommands &&
          StringRef(argv[1]) == sub->getName())
        return *sub;
  return *cl::TopLevelSubCommand;
}

/// The options `sub` accepts. At the top level, LLVM's libraries register
/// hundreds that memfit hides and does not offer (main.cpp); a command holds
/// only its own and the general ones (--help, --version).
bool accepts(cl::SubCommand &sub, const cl::Option &o) {
  return &sub != &*cl::TopLevelSubCommand ||
         o.getOptionHiddenFlag() != cl::ReallyHidden;
}

std::string nearest(cl::SubCommand &sub, StringRef name) {
  std::string best;
  unsigned bestDistance = ~0u;
  for (const auto &entry : sub.OptionsMap) {
    const cl::Option &o = *entry.second;
    if (!accepts(sub, o) || o.getOptionHiddenFlag() != cl::NotHidden)
      continue;
    // Keys in name order make the choice among equals deterministic.
    unsigned d = name.edit_distance(entry.first(), true, bestDistance);
    if (d < bestDistance || (d == bestDistance && entry.first().str() < best)) {
      bestDistance = d;
      best = entry.first().str();
    }
  }
  return best;
}

} // namespace

std::optional<std::string> findUnknownOption(int argc,
                                             const char *const *argv) {
  cl::SubCommand &sub = namedCommand(argc, argv);
  int first = &sub == &*cl::TopLevelSubCommand ? 1 : 2;
  for (int i = first; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg == "--")
      break;
    if (arg.size() < 2 || arg[0] != '-')
      continue; // a positional argument, or "-"
    StringRef name = arg.drop_front(arg.startswith("--") ? 2 : 1);
    auto [key, value] = name.split('=');
    // LLVM's -h (--help) is a default option: the parser adds it itself
    // when it starts, so it is not registered yet.
    if (name == "h")
      continue;
    bool inlineValue = name.contains('=');
    auto it = sub.OptionsMap.find(key);
    if (it != sub.OptionsMap.end() && accepts(sub, *it->second)) {
      if (!inlineValue &&
          it->second->getValueExpectedFlag() == cl::ValueRequired)
        ++i; // its value, whatever it looks like
      continue;
    }
    std::string where = &sub == &*cl::TopLevelSubCommand
                            ? std::string("memfit")
                            : "memfit " + sub.getName().str();
    std::string msg = "unknown option '" + arg.split('=').first.str() +
                      "' for '" + where + "'";
    std::string suggestion = nearest(sub, key);
    if (!suggestion.empty())
      msg += "; did you mean '--" + suggestion + "'?";
    msg += " ('" + where + " --help' lists the options)";
    return msg;
  }
  return std::nullopt;
}

} // namespace memfit::tool
