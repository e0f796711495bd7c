//===- Evaluate.h - Validation with the evaluation program ------*- C++ -*-===//
//
// The trainer's --val-data/--val-labels or --val-tokens, run through the
// program's evaluation round (memfit's planned forward-only schedule, in the
// training arena): batch after batch of the validation set in order, the
// last one padded with copies of its last sample that the loss leaves out
// (Exec::evalValidEnd), every rank its slice of each global batch, the sums
// added over the ranks. Between optimizer steps: it waits for the device
// first and leaves nothing behind that training reads.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_RUNTIME_EVALUATE_H
#define MEMFIT_RUNTIME_EVALUATE_H

#include "runtime/BatchFill.h"
#include "runtime/Exec.h"

#include <cstdint>

namespace memfit::rt {

struct Validation {
  /// The mean loss over every position (cross-entropy: each label; mse:
  /// each element), as PyTorch's mean-reduced loss over the whole set.
  double loss = 0;
  /// Cross-entropy: the share of positions whose largest logit is the
  /// label's; NaN for mse.
  double accuracy = 0;
  /// Language models (token ids in): exp(loss); NaN otherwise.
  double perplexity = 0;
  int64_t samples = 0; // every rank's
  double seconds = 0;  // wall time of the evaluation
};

/// Evaluates the first `maxBatches` global batches of `val` (0: all).
Validation evaluate(Exec &x, const Program &program, const Dataset &val,
                    int64_t maxBatches, int threads);

/// "val loss 2.3025  accuracy 10.16%  (10000 samples, 1.2 s)".
std::string describeValidation(const Validation &v);

} // namespace memfit::rt

#endif
