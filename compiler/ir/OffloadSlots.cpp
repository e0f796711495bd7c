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

int64_t batchBufferBytes(const TaskGraph &tg, int64_t batch) {
  constexpr int64_t kBuffers = 2; // runtime/Exec.h's kBatchBuffers
  int64_t bytes = 0;
  for (BlockId b : {tg.inputBlock, tg.labelBlock}) {
    if (b < 0)
      continue;
    const Block &blk = tg.blocks[b];
    const int64_t elements = blk.perSampleBytes / dtypeBytes(blk.dtype);
    const bool copy16 = b == tg.inputBlock && dtypeBytes(blk.dtype) == 2;
    bytes += elements * batch * (4 + (copy16 ? 2 : 0));
  }
  return kBuffers * bytes;
}

} // namespace memfit
