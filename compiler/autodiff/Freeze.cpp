//===- Freeze.cpp - Which weights a training run updates ------------------===//
#include "compiler/autodiff/Freeze.h"

#include "compiler/support/Diagnostics.h"

#include "llvm/Support/Regex.h"

#include <algorithm>
#include <optional>

namespace memfit {

namespace {

/// The pattern of `flag`, compiled; nullopt when the flag is unset.
llvm::Expected<std::optional<llvm::Regex>> compile(const std::string &pattern,
                                                   const char *flag) {
  if (pattern.empty())
    return std::nullopt;
  llvm::Regex re(pattern, llvm::Regex::NoFlags);
  std::string why;
  if (!re.isValid(why))
    return makeErrorF("invalid {0} '{1}': {2} (a POSIX extended regular "
                      "expression, as grep -E reads)",
                      flag, pattern, why);
  return std::optional<llvm::Regex>(std::move(re));
}

/// A few weight names, to show what a pattern is matched against.
std::string someNames(const Graph &g, const std::vector<ValueId> &weights) {
  std::string out;
  size_t shown = std::min<size_t>(weights.size(), 4);
  for (size_t i = 0; i < shown; ++i)
    out += (i ? ", " : "") + quoteName(g.values[weights[i]].name);
  return out + (weights.size() > shown ? ", ..." : "");
}

} // namespace

llvm::Expected<std::vector<bool>> frozenWeights(const Graph &g,
                                                const FreezeSpec &spec) {
  std::vector<bool> frozen(g.values.size(), false);
  if (spec.empty())
    return frozen;
  auto freeze = compile(spec.freeze, "--freeze");
  if (!freeze)
    return freeze.takeError();
  auto only = compile(spec.trainOnly, "--train-only");
  if (!only)
    return only.takeError();
  std::vector<ValueId> weights;
  for (ValueId w : g.weights())
    if (g.values[w].trainable)
      weights.push_back(w);
  int64_t freezeHits = 0, onlyHits = 0, trained = 0;
  for (ValueId w : weights) {
    const std::string &name = g.values[w].name;
    bool inOnly = !*only || (*only)->match(name);
    bool inFreeze = *freeze && (*freeze)->match(name);
    onlyHits += *only && inOnly;
    freezeHits += inFreeze;
    frozen[w] = !inOnly || inFreeze;
    trained += !frozen[w];
  }
  if (*only && onlyHits == 0)
    return makeErrorF("--train-only '{0}' matches no trainable weight of the "
                      "model (its {1} weights are named {2})",
                      spec.trainOnly, weights.size(), someNames(g, weights));
  if (*freeze && freezeHits == 0)
    return makeErrorF("--freeze '{0}' matches no trainable weight of the "
                      "model (its {1} weights are named {2})",
                      spec.freeze, weights.size(), someNames(g, weights));
  if (trained == 0)
    return makeErrorF(
        "{0} leaves no weight to train: all {1} trainable weights of the "
        "model are frozen",
        *only && *freeze ? "--train-only '" + spec.trainOnly +
                               "' with --freeze '" + spec.freeze + "'"
        : *freeze ? "--freeze '" + spec.freeze + "'"
                  : "--train-only '" + spec.trainOnly + "'",
        weights.size());
  return frozen;
}

} // namespace memfit
