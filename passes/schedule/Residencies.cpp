//===- Residencies.cpp - Where every block is, and when it is next used ---===//
#include "passes/schedule/Residencies.h"

#include <algorithm>

namespace memfit::sched {

RoundCursor::RoundCursor(const TaskGraph &tg, const CostTable &costs,
                         const std::vector<TaskId> &order) {
  auto n = static_cast<int32_t>(order.size());
  prefix.assign(n + 1, 0);
  firstBackward = n;
  for (int32_t s = 0; s < n; ++s) {
    TaskId t = order[s];
    prefix[s + 1] = prefix[s] + costs.fastest(t).seconds;
    if (tg.tasks[t].kind != TaskKind::Forward && firstBackward == n)
      firstBackward = s;
  }
  if (tg.evaluation)
    firstBackward = n;
}

Residencies::Residencies(const TaskGraph &tg, const std::vector<TaskId> &order,
                         int64_t subBatch, bool gradientsCarry) {
  size_t nb = tg.blocks.size();
  storage.resize(nb);
  resident.resize(nb);
  homedOff.resize(nb);
  bytes.resize(nb);
  for (BlockId b = 0; b < (BlockId)nb; ++b) {
    storage[b] = memfit::storageOf(tg, b);
    resident[b] = tg.isResident(b);
    homedOff[b] = tg.homeOf(b) != Tier::Gpu;
    bytes[b] = tg.blocks[b].bytesAt(subBatch);
  }
  state.assign(nb, BlockState{});
  pins.assign(nb, 0);
  recomputable = recomputableBlocks(tg);
  convOutput.assign(nb, false);
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    convOutput[b] =
        recomputable[b] &&
        isConvolution(tg.layers[tg.tasks[tg.blocks[b].writers[0]].op].kind);
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    if (isBatchData(tg.blocks[b].kind) ||
        (homedOff[b] &&
         (tg.blocks[b].kind != BlockKind::WeightGrad || gradientsCarry))) {
      state[b].hasContent = true;
      state[b].hostValid = true;
    }
  // One walk over the tasks (their operand lists are scattered in memory):
  // each step's reads, and each step once per block it reads or writes,
  // then sorted by block (a counting sort, stable: steps stay ascending).
  std::vector<std::pair<BlockId, int32_t>> stepUses;
  std::vector<int32_t> lastStep(nb, -1);
  readStart.assign(1, 0);
  stepOfTask.assign(tg.tasks.size(), -1);
  for (int32_t s = 0; s < (int32_t)order.size(); ++s) {
    stepOfTask[order[s]] = s;
    const Task &task = tg.tasks[order[s]];
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storage[b];
        if (resident[sb])
          continue;
        if (list == &task.reads)
          stepReads.push_back(sb);
        if (lastStep[sb] != s) {
          lastStep[sb] = s;
          stepUses.push_back({sb, s});
        }
      }
    readStart.push_back(stepReads.size());
  }
  useStart.assign(nb + 1, 0);
  for (const auto &[sb, s] : stepUses)
    ++useStart[sb + 1];
  for (size_t b = 0; b < nb; ++b)
    useStart[b + 1] += useStart[b];
  useSteps.resize(stepUses.size());
  std::vector<size_t> filled(useStart.begin(), useStart.end() - 1);
  for (const auto &[sb, s] : stepUses)
    useSteps[filled[sb]++] = s;
}

void Residencies::usedUpTo(BlockId b, int32_t step) {
  BlockState &bs = state[b];
  std::span<const int32_t> u = usesOf(b);
  while (bs.nextUse < u.size() && u[bs.nextUse] <= step)
    ++bs.nextUse;
}

ResidencyId Residencies::add(BlockId b, int64_t offset) {
  Residency r;
  r.block = b;
  r.offset = offset;
  r.bytes = bytes[b];
  list.push_back(r);
  pendingUses.emplace_back();
  return static_cast<ResidencyId>(list.size() - 1);
}

} // namespace memfit::sched
