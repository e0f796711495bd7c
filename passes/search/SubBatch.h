//===- SubBatch.h - Sub-batch size selection (moDNN Eq. 3) ------*- C++ -*-===//
//
// The batch runs as K sub-batches of b samples with gradients accumulated.
// moDNN picks b by iterating Eq. 3, b <- (M - SW) / max_t Mmin(t, b) per
// sample, with the fastest algorithm's workspace in Mmin, until b stops
// changing (workspace need not scale with b, hence the iteration).
// `subBatchCandidates` adds the sizes memfit also tries and compares by
// simulated time: from the batch down to half of Eq. 3's b, the most even
// split for every count of sub-batches (Eq. 3 charges the fastest
// algorithm's workspace, so larger sub-batches may fit with leaner ones),
// and below that the halvings down to an eighth of Eq. 3's b.
//
// Guarantees: 1 <= b <= B; the result is a fixed point or the smaller end
// of a cycle; candidates are sorted, distinct and include Eq. 3's b.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SUBBATCH_H
#define MEMFIT_PASSES_SUBBATCH_H

#include "compiler/ir/CostTable.h"

#include <functional>
#include <vector>

namespace memfit {

/// The cost table at a sub-batch. A table it returns stays where it is,
/// unchanged, while the planning runs: the planner keeps references to it
/// (several schedules read one table at once).
using CostTableFn = std::function<const CostTable &(int64_t subBatch)>;

/// The largest per-task need at the table's sub-batch: blocks plus fastest
/// workspace.
int64_t maxTaskNeed(const TaskGraph &tg, const CostTable &costs);

/// Eq. 3 iterated; `budget` is the whole device budget M.
int64_t selectSubBatch(const TaskGraph &tg, const CostTableFn &tableAt,
                       int64_t batch, int64_t budget);

std::vector<int64_t> subBatchCandidates(int64_t eq3, int64_t batch);

/// True when an operator of `tg` computes statistics over the samples of
/// its (sub-)batch (BatchNorm), so splitting the batch changes what it
/// computes; gradient accumulation over sub-batches is exact otherwise.
bool statisticsOverBatch(const TaskGraph &tg);

} // namespace memfit

#endif
