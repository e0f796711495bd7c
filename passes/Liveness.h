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

#include "compiler/TaskGraph.h"

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

/// The order the task graph was built in (forward, loss, backward, update).
std::vector<TaskId> builtOrder(const TaskGraph &tg);

/// The block a view aliases, transitively; `b` itself when it is no view.
BlockId storageOf(const TaskGraph &tg, BlockId b);

/// The input a task may overwrite with its first output, and that output,
/// when the task allows it (Task::mayRunInPlace), the output does not
/// accumulate, both are activation-side storage blocks of the same size at
/// every sub-batch. Whether the input is still needed later is the caller's
/// question (it depends on the order).
struct InPlacePair {
  BlockId input = -1, output = -1;
};
std::optional<InPlacePair> inPlacePair(const TaskGraph &tg, const Task &t);

Liveness computeLiveness(const TaskGraph &tg, std::vector<TaskId> order,
                         int64_t subBatch, bool inPlace = true);

} // namespace memfit

#endif
