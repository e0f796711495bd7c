//===- ScheduleDecide.cpp - Algorithms, prefetch, early offload, vDNN -----===//
#include "passes/Scheduler.h"

#include <cassert>

namespace memfit::sched {

int32_t Scheduler::chooseAlgo(TaskId t) {
  const std::vector<AlgoCost> &algos = costs.tasks[t];
  if (algos.size() == 1 || opts.policy == Policy::Ideal)
    return algos.front().algo;
  int64_t freeNow = arena.largestFree();
  if (isVdnn()) {
    // vDNN: the fastest algorithm whose workspace fits, else memory-optimal.
    for (const AlgoCost &a : algos)
      if (a.workspace == 0 || alignUp(a.workspace) <= freeNow)
        return a.algo;
    return costs.baseline(t).algo;
  }
  // Bytes the nearest future task will have to prefetch: workspace taken
  // now may postpone that prefetch (Tpre of Eq. 5).
  int64_t nextPrefetch = 0;
  for (int32_t s = step + 1;
       s < (int32_t)order.size() && s <= step + kLookahead && !nextPrefetch;
       ++s)
    for (BlockId b : tg.tasks[order[s]].reads) {
      BlockId sb = storageOfB(b);
      if (!weightSide[sb] && st[sb].res < 0 && st[sb].hostValid)
        nextPrefetch += bytesOf(sb);
    }
  const AlgoCost &base = costs.baseline(t);
  int32_t best = base.algo;
  double bestGain = 0;
  newSearch();
  auto price = [this](int32_t o) { return slotPrice(o); };
  for (const AlgoCost &a : algos) {
    // The gain only shrinks from here (Toff, Tpre >= 0): no search for an
    // algorithm that cannot win.
    if (a.baseline || base.seconds - a.seconds <= bestGain)
      continue;
    double toff = 0;
    if (a.workspace > 0 && alignUp(a.workspace) > freeNow) {
      auto w = searchEviction(a.workspace, price);
      toff = w ? w->score : kInf;
    }
    double tpre = 0;
    int64_t left = arena.size() - arena.usedBytes() - alignUp(a.workspace);
    if (nextPrefetch > 0 && left < nextPrefetch)
      tpre = costs.copyInSeconds(std::min(nextPrefetch, nextPrefetch - left));
    double gain = base.seconds - a.seconds - toff - tpre;
    if (gain > bestGain) {
      bestGain = gain;
      best = a.algo;
    }
  }
  return best;
}

void Scheduler::prefetchAhead(double taskEnd) {
  if (opts.policy == Policy::Ideal || isVdnn())
    return;
  int32_t n = static_cast<int32_t>(order.size());
  double copyFree = streamFree[si(Stream::CopyIn)];
  for (int32_t s = step + 1; s < n && s <= step + kLookahead; ++s) {
    std::vector<BlockId> need;
    int64_t bytes = 0;
    const Task &task = tg.tasks[order[s]];
    auto consider = [&](BlockId b) {
      BlockId sb = storageOfB(b);
      // Only what has a host copy can be prefetched; a dropped block is
      // recomputed when its task comes.
      if (weightSide[sb] || st[sb].res >= 0 || !st[sb].hostValid)
        return;
      if (std::find(need.begin(), need.end(), sb) != need.end())
        return;
      need.push_back(sb);
      bytes += bytesOf(sb);
    };
    for (BlockId b : task.reads)
      consider(b);
    for (size_t i = 0; i < task.writes.size(); ++i)
      if (task.accumulates[i])
        consider(task.writes[i]);
    double estS = taskEnd + prefix[s] - prefix[step + 1];
    if (need.empty()) {
      // Far enough ahead that even a late prefetch of everything would be
      // in time: stop looking.
      if (estS - taskEnd > 4 * (copyFree - taskEnd + 1e-3))
        break;
      continue;
    }
    double transfer = 0;
    for (BlockId b : need)
      transfer += costs.copyInSeconds(bytesOf(b));
    // Eq. 4: start now if starting after this task would delay task s.
    if (std::max(copyFree, taskEnd) + transfer <= estS)
      break;
    for (BlockId b : need) {
      // Make room only by dropping blocks that already have a host copy
      // and are needed after s: a prefetch must never cause an offload
      // that delays the current task.
      newSearch();
      auto price = [&](int32_t o) {
        if (!evictableMemo(o))
          return Arena::SlotPrice{};
        BlockId ob = plan.residencies[o].block;
        int32_t next = nextUseStep(ob);
        if (!st[ob].hostValid || (next >= 0 && next <= s))
          return Arena::SlotPrice{};
        return slotPrice(o);
      };
      StreamUses uses{};
      auto ownerId = static_cast<int32_t>(plan.residencies.size());
      std::optional<int64_t> off;
      if (auto a = arena.allocate(bytesOf(b), ownerId)) {
        off = a->first;
        uses = a->second;
      } else if (auto w = searchEviction(bytesOf(b), price)) {
        cause = {LeaveCause::Prefetch, step, b, s, bytesOf(b), 0};
        for (int32_t o : w->owners)
          evict(o);
        uses = arena.allocateAt(w->offset, bytesOf(b), ownerId);
        off = w->offset;
      }
      if (!off)
        return; // no room: later tasks would only fragment the arena more
      ResidencyId r = newResidency(b, *off);
      copyIn(b, r, uses);
    }
    copyFree = streamFree[si(Stream::CopyIn)];
  }
}

void Scheduler::offloadAhead(TaskId t) {
  // Offload early, free late: copy out blocks with a long reuse distance
  // while the copy engine is idle, keep the device copy, and drop it for
  // free when space runs out. Only as many bytes as the budget requires.
  if (opts.policy != Policy::Memfit || offloadedAhead >= offloadTarget)
    return;
  const Task &task = tg.tasks[t];
  if (task.kind != TaskKind::Forward)
    return;
  std::vector<BlockId> cands;
  for (BlockId b : task.reads)
    cands.push_back(storageOfB(b));
  for (BlockId b : task.writes)
    cands.push_back(storageOfB(b));
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  for (BlockId b : cands) {
    BlockState &bs = st[b];
    const Block &blk = tg.blocks[b];
    if (isWeightSide(blk.kind) || bs.res < 0 || bs.hostValid ||
        blk.kind == BlockKind::Stats)
      continue;
    int32_t next = nextUseStep(b);
    if (next < firstBackward)
      continue; // still needed in the forward pass
    // Only while the copy engine is idle: a queue of early copies would
    // hold bytes that later allocations have to wait for.
    if (streamFree[si(Stream::CopyOut)] > streamFree[si(Stream::Compute)])
      return;
    double now = timing[bs.ready].end;
    double gap = est(next, now) - now;
    if (gap < 2 * (costs.copyOutSeconds(bytesOf(b)) +
                   costs.copyInSeconds(bytesOf(b))))
      continue;
    Instr in;
    in.kind = InstrKind::CopyOut;
    in.stream = Stream::CopyOut;
    in.residency = bs.res;
    int32_t i = emit(in, costs.copyOutSeconds(bytesOf(b)), {bs.ready});
    touch(bs.res, Stream::CopyOut, i);
    cause = {LeaveCause::Early, step, -1, next, bytesOf(b), gap};
    noteOffload(b);
    bs.hostValid = true;
    bs.hostCopy = i;
    bs.everOffloaded = true;
    plan.summary.bytesToHost += bytesOf(b);
    offloadedAhead += bytesOf(b);
    if (offloadedAhead >= offloadTarget)
      return;
  }
}

void Scheduler::vdnnPrefetch(TaskId t) {
  // vDNN's findPrefetchLayer: the nearest earlier layer whose input was
  // offloaded and not yet prefetched; the window ends at a convolution.
  OpId l = tg.tasks[t].op;
  for (OpId id = l - 1; id >= 0; --id) {
    if (vdnnOffloaded[id] && !vdnnPrefetched[id]) {
      vdnnPrefetched[id] = true;
      for (BlockId x : tg.layers[id].dataInputs) {
        BlockId b = storageOfB(x);
        if (st[b].res >= 0 || !st[b].hostValid || nextUseStep(b) < 0)
          continue;
        StreamUses uses{};
        auto ownerId = static_cast<int32_t>(plan.residencies.size());
        auto a = arena.allocate(bytesOf(b), ownerId);
        if (!a)
          continue; // fetched on demand when its task runs
        ResidencyId r = newResidency(b, a->first);
        syncLayer.push_back(copyIn(b, r, a->second));
        (void)uses;
      }
      return;
    }
    if (tg.layers[id].kind == OpKind::Conv)
      return;
  }
}

} // namespace memfit::sched
