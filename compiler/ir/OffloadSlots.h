//===- OffloadSlots.h - The pinned host slots of offloaded blocks -*- C++
//-*-===//
//
// The one rule for which blocks a trainer keeps a pinned host buffer
// (slot) for: every block the round copies out or in that is neither batch
// data (copied from the data loader's buffers) nor homed off the GPU
// (copied from its home). Codegen makes one slot per such block; the tier
// search counts their bytes against --host-budget.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_OFFLOADSLOTS_H
#define MEMFIT_COMPILER_IR_OFFLOADSLOTS_H

#include "compiler/ir/Plan.h"
#include "compiler/ir/TaskGraph.h"

#include <cstdint>
#include <vector>

namespace memfit {

/// The blocks with a slot, in the order of their first copy in the round.
std::vector<BlockId> offloadSlotBlocks(const TaskGraph &tg, const Plan &plan);

/// Their bytes at the plan's sub-batch: pinned host memory the trainer
/// allocates beside the homes.
int64_t offloadSlotBytes(const TaskGraph &tg, const Plan &plan);

} // namespace memfit

#endif
