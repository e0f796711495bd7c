//===- WorkingCopies.cpp - f32 working copies of homed weights -----------===//
#include "compiler/ir/WorkingCopies.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace memfit {
namespace {

/// Whether `b` is the master of a trained weight homed off the GPU that has
/// no working copy yet.
bool wantsCopy(const TaskGraph &tg, BlockId b) {
  const Block &blk = tg.blocks[b];
  if (blk.kind != BlockKind::Weight || blk.viewOf >= 0 || blk.value < 0 ||
      tg.homeOf(b) == Tier::Gpu || tg.weightCopyBlock[blk.value] >= 0 ||
      tg.valueBlock[blk.value] != b)
    return false;
  return std::any_of(blk.writers.begin(), blk.writers.end(), [&](TaskId t) {
    return tg.tasks[t].kind == TaskKind::Update;
  });
}

} // namespace

int32_t addFullPrecisionCopies(TaskGraph &tg) {
  if (tg.precision == Precision::BF16 || tg.precision == Precision::FP16)
    return 0; // their copies exist from the start
  if (tg.dp.active() || tg.homes.empty())
    return 0;
  tg.weightCopyBlock.resize(tg.valueBlock.size(), -1);
  std::vector<BlockId> masterOf; // per new copy
  const auto blocks = static_cast<BlockId>(tg.blocks.size());
  for (BlockId b = 0; b < blocks; ++b) {
    if (!wantsCopy(tg, b))
      continue;
    Block copy;
    copy.name = "f32(" + tg.graph->values[tg.blocks[b].value].name + ")";
    copy.kind = BlockKind::WeightCopy;
    copy.value = tg.blocks[b].value;
    copy.fixedBytes = tg.blocks[b].bytesAt(1);
    copy.dtype = DType::F32;
    auto id = static_cast<BlockId>(tg.blocks.size());
    tg.weightCopyBlock[copy.value] = id;
    tg.blocks.push_back(std::move(copy));
    tg.homes.push_back(tg.homes[b]);
    masterOf.push_back(b);
  }
  if (masterOf.empty())
    return 0;
  // Every task but the update reads the copy instead of the master; the
  // update, which reads and writes the master, writes the copy too.
  for (BlockId c = blocks; c < (BlockId)tg.blocks.size(); ++c) {
    const BlockId m = masterOf[c - blocks];
    Block &master = tg.blocks[m];
    std::vector<TaskId> readers;
    for (TaskId t : master.readers) {
      Task &task = tg.tasks[t];
      if (task.kind == TaskKind::Update) {
        readers.push_back(t);
        task.writes.push_back(c);
        tg.blocks[c].writers.push_back(t);
        continue;
      }
      std::replace(task.reads.begin(), task.reads.end(), m, c);
      tg.blocks[c].readers.push_back(t);
    }
    tg.blocks[m].readers = std::move(readers);
  }
  // The copy's write by the update never accumulates.
  setAccumulateFlags(tg);
  assert(!verifyTaskGraph(tg) && "working copies broke the task graph");
  return static_cast<int32_t>(masterOf.size());
}

} // namespace memfit
