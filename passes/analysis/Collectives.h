//===- Collectives.h - Collectives on their own stream ----------*- C++ -*-===//
//
// Prices and places the gradient collectives of data-parallel training on a
// stream of their own, as PyTorch DDP and DeepSpeed ZeRO run them:
//
// - replicated (shard 0): each bucket is all-reduced once its gradients are
//   final in the last sub-batch, overlapping the rest of the backward pass;
// - shard 1: the same buckets reduce-scattered, each rank updates its slice
//   of every weight, and the weights are all-gathered after the update;
// - shard 2: as shard 1, but every sub-batch's buckets are reduce-scattered
//   (gradients are accumulated in slices, so whole ones do not outlive
//   their sub-batch).
//
// An update waits for its bucket's collective; the weights' all-gather runs
// after the last update and is not overlapped with the next iteration's
// forward pass (a conservative prediction). Guarantees: the iteration time
// is never below the plan's without collectives, and the collective stream
// runs its buckets in order, none before its gradients are final.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_COLLECTIVES_H
#define MEMFIT_PASSES_COLLECTIVES_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "compiler/ir/Simulation.h"

#include <vector>

namespace memfit {

/// When each round's instructions end, from the round's own start.
struct RoundEnds {
  const std::vector<double> *full = nullptr, *last = nullptr;
  double fullSeconds = 0, lastSeconds = 0;
};

/// Adds the collective stream to `sim` (whose iteration time, update
/// instruction times and round times are those without collectives) and
/// moves its iteration time accordingly. Nothing when not data-parallel.
void simulateCollectives(const TaskGraph &tg, const Plan &plan,
                         const CostTable &costs, const RoundEnds &rounds,
                         Simulation &sim);

} // namespace memfit

#endif
