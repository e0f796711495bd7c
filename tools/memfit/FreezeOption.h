//===- FreezeOption.h - The --freeze and --train-only flags -----*- C++ -*-===//
//
// inspect, plan, compile and compare take the same flags choosing which
// weights train (compiler/autodiff/Freeze.h) and which initializers are
// constants (ImportOptions::constants), so their help lives here once.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_TOOLS_MEMFIT_FREEZEOPTION_H
#define MEMFIT_TOOLS_MEMFIT_FREEZEOPTION_H

#include "compiler/support/Diagnostics.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace memfit::tool {

inline constexpr const char *kFreezeRowsHelp =
    "NAME:ROW: lookups of row ROW of the embedding table NAME add no "
    "gradient, as nn.Embedding(padding_idx=ROW) keeps it in PyTorch (the "
    "ONNX file does not record it); may be repeated";

/// --freeze-rows values as ImportOptions::frozenRows: the name is all
/// before the last ':'.
inline llvm::Expected<std::vector<std::pair<std::string, int64_t>>>
parseFrozenRows(const std::vector<std::string> &values) {
  std::vector<std::pair<std::string, int64_t>> rows;
  for (const std::string &v : values) {
    size_t colon = v.rfind(':');
    int64_t row = -1;
    bool ok = colon != std::string::npos && colon > 0 && colon + 1 < v.size();
    for (size_t i = colon + 1; ok && i < v.size(); ++i)
      ok = v[i] >= '0' && v[i] <= '9' && i - colon < 12;
    if (ok)
      row = std::stoll(v.substr(colon + 1));
    if (!ok)
      return makeError("--freeze-rows " + quoteName(v) +
                       ": expected NAME:ROW, a table's name and a row "
                       "number (0, 1, ...)");
    rows.emplace_back(v.substr(0, colon), row);
  }
  return rows;
}

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
