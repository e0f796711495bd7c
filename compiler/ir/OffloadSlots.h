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

/// The trainer's pinned batch buffers (runtime/Exec.h, kBatchBuffers): two
/// of the whole batch's input (fp32 or int32 token ids, with a 16-bit copy
/// where the input block is 16-bit) and labels (4 bytes an element), one
/// filled while the other is read.
int64_t batchBufferBytes(const TaskGraph &tg, int64_t batch);

} // namespace memfit

#endif
