//===- OffloadSlots.cpp - The pinned host slots of offloaded blocks -------===//
#include "compiler/ir/OffloadSlots.h"

namespace memfit {

std::vector<BlockId> offloadSlotBlocks(const TaskGraph &tg, const Plan &plan) {
  std::vector<BlockId> slots;
  std::vector<bool> seen(tg.blocks.size(), false);
  for (const Instr &in : plan.round) {
    if (in.kind != InstrKind::CopyOut && in.kind != InstrKind::CopyIn)
      continue;
    BlockId b = plan.residencies[in.residency].block;
    if (isBatchData(tg.blocks[b].kind) || tg.homeOf(b) != Tier::Gpu || seen[b])
      continue;
    seen[b] = true;
    slots.push_back(b);
  }
  return slots;
}

int64_t offloadSlotBytes(const TaskGraph &tg, const Plan &plan) {
  int64_t bytes = 0;
  for (BlockId b : offloadSlotBlocks(tg, plan))
    bytes += tg.blocks[b].bytesAt(plan.subBatch);
  return bytes;
}

} // namespace memfit
