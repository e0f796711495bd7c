//===- GradPool.h - Homed gradients through one pinned pool -----*- C++ -*-===//
//
// A weight homed on the host needs its gradient in pinned host memory only
// from its copy home in the last round until its host update has read it.
// When the host budget cannot give every homed gradient a buffer of its
// own (TaskGraph::gradPoolBytes > 0), they stream through one pool, as
// MegaTrain's gradient slabs do: each final gradient takes the next bytes
// of a ring and gives them back when its update has finished, so the pool
// holds the gradients whose updates are queued or running, not all of
// them, and the semantics stay torch.optim's.
//
// poolGradients assigns the offsets. Guarantees: a gradient is pooled only
// in a plan of one round (no earlier sub-batch's sum to keep between
// rounds), only when its update starts inside that round (HostOverlap) and
// its one copy in the round is that copy-out, and only when it fits the
// pool; pooled ranges lie in [0, gradPoolBytes); before the copy-out of a
// pooled gradient whose range overlaps an earlier one's, a WaitHost on the
// copy-out stream waits for the earlier one's update (once per update).
// Other homed gradients keep their own buffers; plans of graphs without a
// pool are left unchanged.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SCHEDULE_GRADPOOL_H
#define MEMFIT_PASSES_SCHEDULE_GRADPOOL_H

#include "compiler/ir/Plan.h"

namespace memfit {

/// Byte alignment of each gradient's range in the pool.
constexpr int64_t kGradPoolAlign = 256;

/// Streams `plan`'s homed gradients through tg.gradPoolBytes of pinned
/// host memory where the plan allows (see the file comment); returns how
/// many gradients it pooled.
int32_t poolGradients(const TaskGraph &tg, Plan &plan);

} // namespace memfit

#endif
