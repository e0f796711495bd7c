//===- FreezeOption.h - The --freeze and --train-only flags -----*- C++ -*-===//
//
// inspect, plan, compile and compare take the same flags choosing which
// weights train (compiler/autodiff/Freeze.h) and which initializers are
// constants (ImportOptions::constants), so their help lives here once.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_MEMFIT_FREEZEOPTION_H
#define MEMFIT_TOOLS_MEMFIT_FREEZEOPTION_H

namespace memfit::tool {

inline constexpr const char *kFreezeHelp =
    "Keep the weights whose name matches this regular expression (POSIX "
    "extended, searched in the name as grep -E does) fixed: no gradient, "
    "optimizer state or update for them";
inline constexpr const char *kConstantsHelp =
    "The initializers whose name matches this regular expression (POSIX "
    "extended, as grep -E) are buffers, not parameters: constants with no "
    "gradient and no optimizer state, which the importer may fold (list a "
    "PyTorch module's buffers with [n for n, _ in model.named_buffers()])";
inline constexpr const char *kTrainOnlyHelp =
    "Train only the weights whose name matches this regular expression; "
    "with --freeze, the weights it matches are then taken out";

} // namespace memfit::tool

#endif
