//===- Liveness.cpp - Block lifetimes over an execution order -------------===//
#include "passes/analysis/Liveness.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace memfit {

Liveness computeLiveness(const TaskGraph &tg, std::vector<TaskId> order,
                         int64_t subBatch, bool inPlace) {
  // The scheduler passes a round without the update tasks, which touch the
  // weight side only.
  assert(order.size() <= tg.tasks.size() && "an order lists a task once");
  Liveness lv;
  lv.order = std::move(order);
  size_t nb = tg.blocks.size();
  lv.start.assign(nb, -1);
  lv.end.assign(nb, -1);
  auto touch = [&](BlockId b, int32_t step) {
    b = storageOf(tg, b);
    if (lv.start[b] < 0 || step < lv.start[b])
      lv.start[b] = step;
    lv.end[b] = std::max(lv.end[b], step);
  };
  for (int32_t s = 0; s < (int32_t)lv.order.size(); ++s) {
    const Task &t = tg.tasks[lv.order[s]];
    // A weight homed off the device is updated there: its update touches
    // no device memory.
    if (tg.runsOnHost(t))
      continue;
    for (BlockId b : t.reads)
      touch(b, s);
    for (BlockId b : t.writes)
      touch(b, s);
  }
  // The round's data arrives as it starts; in a graph split along the
  // batch, only the first chunk's (the others arrive as they are needed).
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (isBatchData(tg.blocks[b].kind) && tg.blocks[b].chunk <= 0 &&
        lv.start[storageOf(tg, b)] >= 0)
      lv.start[storageOf(tg, b)] = 0;

  size_t steps = lv.order.size();
  // Where a task overwrites its input in place, the input's bytes are the
  // output's at that step.
  std::vector<int32_t> countedTo = lv.end;
  if (inPlace)
    for (int32_t s = 0; s < (int32_t)steps; ++s) {
      auto p = inPlacePair(tg, tg.tasks[lv.order[s]]);
      if (p && lv.end[p->input] == s && lv.start[p->output] == s &&
          lv.start[p->input] < s)
        countedTo[p->input] = s - 1;
    }
  std::vector<int64_t> delta(steps + 1, 0);
  lv.weightSideBytes += tg.collectiveBufferBytes;
  for (BlockId b = 0; b < (BlockId)nb; ++b) {
    const Block &blk = tg.blocks[b];
    if (tg.isResident(b)) {
      lv.weightSideBytes += blk.bytesAt(subBatch);
      continue;
    }
    if (blk.viewOf >= 0 || lv.start[b] < 0)
      continue;
    int64_t bytes = blk.bytesAt(subBatch);
    delta[lv.start[b]] += bytes;
    delta[countedTo[b] + 1] -= bytes;
  }
  lv.liveBytes.resize(steps);
  int64_t live = 0, peak = -1;
  for (size_t s = 0; s < steps; ++s) {
    live += delta[s];
    lv.liveBytes[s] = live;
    if (live > peak) {
      peak = live;
      lv.peakStep = static_cast<int32_t>(s);
    }
  }
  lv.peakBytes = std::max<int64_t>(peak, 0) + lv.weightSideBytes;
  return lv;
}

} // namespace memfit
