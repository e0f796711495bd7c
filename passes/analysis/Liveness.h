//===- Liveness.h - Block lifetimes over an execution order -----*- C++ -*-===//
//
// For a task order, gives every block its live interval [first step that
// writes or needs it, last step that reads or writes it], with views folded
// into the block they alias, and the live-bytes profile at a sub-batch b.
//
// Guarantees: a block is live at every step that touches it; the input batch
// and labels are live from step 0 (they are loaded before the iteration);
// weight-side blocks are resident for the whole iteration and counted in
// every step; the peak is the exact maximum of the per-step sums. With
// inPlace, an input that a task overwrites in place (its last use, the same
// size as the output; Task::mayRunInPlace) is not counted at that step, as
// the scheduler does it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_LIVENESS_H
#define MEMFIT_PASSES_LIVENESS_H

#include "compiler/ir/TaskGraph.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace memfit {

struct Liveness {
  std::vector<TaskId> order;
  /// Per block, steps (indices into `order`); -1/-1 for blocks that are
  /// views (they live in their base) or that no task touches.
  std::vector<int32_t> start, end;
  /// Live non-weight-side bytes at each step, at the sub-batch given.
  std::vector<int64_t> liveBytes;
  int64_t weightSideBytes = 0;
  int64_t peakBytes = 0; // max(liveBytes) + weightSideBytes
  int32_t peakStep = -1;
};

Liveness computeLiveness(const TaskGraph &tg, std::vector<TaskId> order,
                         int64_t subBatch, bool inPlace = true);

} // namespace memfit

#endif
