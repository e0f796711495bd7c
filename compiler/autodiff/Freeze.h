//===- Freeze.h - Which weights a training run updates ----------*- C++ -*-===//
//
// --freeze and --train-only: fine-tuning keeps most of a model's weights
// fixed (LoRA trains small adapters beside frozen base weights). A frozen
// weight is read like any weight but gets no gradient, no optimizer state
// and no update (Autodiff.h).
//
// Guarantees: each pattern compiles and selects at least one trainable
// weight of the graph, and at least one weight is left to train; otherwise
// a user error naming the flag and the pattern. Only trainable weights are
// candidates: state such as BatchNorm's running statistics never trains
// and is never counted as frozen. The result depends on the names alone,
// so every graph variant of one model freezes the same weights.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_AUTODIFF_FREEZE_H
#define MEMFIT_COMPILER_AUTODIFF_FREEZE_H

#include "compiler/ir/Graph.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace memfit {

/// POSIX extended regular expressions, searched in each weight's name (as
/// `grep -E`: anchor with ^ and $ to match the whole name). Empty: unset.
/// A weight trains when it matches `trainOnly` (or that is unset) and does
/// not match `freeze`: --train-only chooses the set, --freeze takes weights
/// out of it.
struct FreezeSpec {
  std::string freeze, trainOnly;
  bool empty() const { return freeze.empty() && trainOnly.empty(); }
};

/// Per value of `g`: whether it is a trainable weight that `spec` freezes.
llvm::Expected<std::vector<bool>> frozenWeights(const Graph &g,
                                                const FreezeSpec &spec);

} // namespace memfit

#endif
