//===- ScheduleLookahead.cpp - Decisions that look at the tasks ahead -----===//
//
// The algorithm of each task (Eq. 5 weighs the nearest future prefetch),
// Eq. 4's look-ahead prefetch, memfit's early offload and vDNN's
// findPrefetchLayer.
//
//===----------------------------------------------------------------------===//
#include "passes/schedule/Scheduler.h"

#include <algorithm>
#include <cassert>

namespace memfit::sched {

int32_t Scheduler::chooseAlgo(TaskId t, std::optional<Arena::Window> &room) {
  room.reset();
  const std::vector<AlgoCost> &algos = costs.tasks[t];
  if (algos.size() == 1 || rules.algo == PolicyRules::AlgoChoice::Fastest)
    return algos.front().algo;
  int64_t freeNow = arena.largestFree();
  if (!opts.fastestAlgo.empty() && opts.fastestAlgo[t]) {
    const AlgoCost &f = costs.fastest(t);
    if (f.workspace > 0 && alignUp(f.workspace) > freeNow) {
      pricer.newSearch();
      room = pricer.search(f.workspace,
                           [this](int32_t o) { return pricer.price(o); });
      if (!room)
        return costs.baseline(t).algo;
    }
    return f.algo;
  }
  if (rules.algo == PolicyRules::AlgoChoice::FastestThatFits) {
    // vDNN: the fastest algorithm whose workspace fits, else memory-optimal.
    for (const AlgoCost &a : algos)
      if (a.workspace == 0 || alignUp(a.workspace) <= freeNow)
        return a.algo;
    return costs.baseline(t).algo;
  }
  // Bytes the nearest future task will have to prefetch: workspace taken
  // now may postpone that prefetch (Tpre of Eq. 5). (The reads of each
  // step are listed once per schedule: this looks up to 256 tasks ahead.)
  const int32_t step = cursor.step;
  int64_t nextPrefetch = 0;
  for (int32_t s = step + 1;
       s < (int32_t)order.size() && s <= step + kLookahead && !nextPrefetch;
       ++s)
    for (BlockId sb : blocks.readsAt(s))
      if (blocks[sb].res < 0 && blocks[sb].hostValid)
        nextPrefetch += blocks.bytesOf(sb);
  const AlgoCost &base = costs.baseline(t);
  int32_t best = base.algo;
  double bestGain = 0;
  pricer.newSearch();
  auto price = [this](int32_t o) { return pricer.price(o); };
  for (const AlgoCost &a : algos) {
    // The gain only shrinks from here (Toff, Tpre >= 0): no search for an
    // algorithm that cannot win.
    if (a.baseline || base.seconds - a.seconds <= bestGain)
      continue;
    double toff = 0;
    std::optional<Arena::Window> w;
    if (a.workspace > 0 && alignUp(a.workspace) > freeNow) {
      w = pricer.search(a.workspace, price);
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
      room = std::move(w); // placing the workspace would search again
    }
  }
  return best;
}

void Scheduler::prefetchAhead(double taskEnd) {
  const int32_t step = cursor.step, n = cursor.size();
  double copyFree = timeline.freeAt(Stream::CopyIn);
  std::vector<BlockId> &need = prefetchNeed;
  std::vector<BlockId> &stack = prefetchStack;
  // A dropped block walked for one task is not walked again for a later
  // one: what it led to was prefetched then, or the look-ahead stopped.
  ++walkStamp;
  int32_t idle = 0; // tasks needing nothing looked past
  for (int32_t s = step + 1; s < n && s <= step + kLookahead; ++s) {
    need.clear();
    int64_t bytes = 0;
    const Task &task = tg.tasks[order[s]];
    // What has a host copy and is not here can be prefetched. A dropped
    // block is recomputed when its task comes: the host copies its
    // recompute reads (the batch's input under a recomputed stem, an
    // offloaded checkpoint) are walked to as well, depth first in the
    // order of the reads, up to kPrefetchChainBlocks dropped blocks;
    // fetched on demand, each would hold up the recompute.
    stack.clear();
    for (size_t i = task.writes.size(); i-- > 0;)
      if (task.accumulates[i])
        stack.push_back(task.writes[i]);
    for (size_t i = task.reads.size(); i-- > 0;)
      stack.push_back(task.reads[i]);
    size_t walked = 0;
    while (!stack.empty()) {
      BlockId sb = blocks.storageOf(stack.back());
      stack.pop_back();
      if (blocks.isResident(sb) || blocks[sb].res >= 0)
        continue;
      if (!blocks[sb].hostValid) {
        if (blocks[sb].dropped && walkSeen[sb] != walkStamp &&
            walked < kPrefetchChainBlocks) {
          walkSeen[sb] = walkStamp;
          ++walked;
          const std::vector<BlockId> &in =
              tg.tasks[tg.blocks[sb].writers[0]].reads;
          for (size_t i = in.size(); i-- > 0;)
            stack.push_back(in[i]);
        }
        continue;
      }
      if (std::find(need.begin(), need.end(), sb) != need.end())
        continue;
      need.push_back(sb);
      bytes += blocks.bytesOf(sb);
    }
    double estS = cursor.estimatedStart(s, taskEnd);
    if (need.empty()) {
      // Far enough ahead that even a late prefetch of everything would be
      // in time: stop looking.
      double busyFor = copyFree - taskEnd;
      if (opts.lookPastIdle)
        busyFor = std::max(busyFor, 0.0);
      if (estS - taskEnd > 4 * (busyFor + 1e-3) ||
          (opts.lookPastIdle && ++idle > kLookPastIdleTasks))
        break;
      continue;
    }
    double transfer = 0;
    for (BlockId b : need)
      transfer += costs.copyInSeconds(tg, b, blocks.bytesOf(b));
    // Eq. 4: start now if starting after this task would delay task s.
    if (std::max(copyFree, taskEnd) + transfer <= estS)
      break;
    if (!prefetchFor(s, need))
      return; // no room: later tasks would only fragment the arena more
    copyFree = timeline.freeAt(Stream::CopyIn);
  }
}

bool Scheduler::prefetchFor(int32_t s, const std::vector<BlockId> &need) {
  for (BlockId b : need) {
    // Make room only by dropping blocks that already have a host copy
    // and are needed after s: a prefetch must never cause an offload
    // that delays the current task.
    pricer.newSearch();
    auto price = [&](int32_t o) {
      if (!pricer.mayLeave(o))
        return Arena::SlotPrice{};
      BlockId ob = blocks.blockOf(o);
      int32_t next = blocks.nextUseStep(ob);
      if (!blocks[ob].hostValid || (next >= 0 && next <= s))
        return Arena::SlotPrice{};
      return pricer.price(o);
    };
    StreamUses uses{};
    ResidencyId id = blocks.nextId();
    std::optional<int64_t> off;
    int64_t bytes = blocks.bytesOf(b);
    if (auto a = arena.allocateFor(bytes, id, Stream::CopyIn,
                                   timeline.freeAt(Stream::CopyIn))) {
      off = a->first;
      uses = a->second;
    } else if (auto w = pricer.search(bytes, price)) {
      cause = {.kind = LeaveCause::Prefetch,
               .step = cursor.step,
               .need = b,
               .nextStep = s,
               .bytes = bytes};
      for (int32_t o : w->owners)
        evict(o);
      uses = arena.allocateAt(w->offset, bytes, id);
      off = w->offset;
    }
    if (!off)
      return false;
    ResidencyId r = blocks.add(b, *off);
    copyIn(b, r, uses);
  }
  return true;
}

void Scheduler::offloadAhead(TaskId t) {
  // Offload early, free late: copy out blocks with a long reuse distance
  // while the copy engine is idle, keep the device copy, and drop it for
  // free when space runs out. Only as many bytes as the budget requires.
  if (offloadedAhead >= offloadTarget)
    return;
  const Task &task = tg.tasks[t];
  if (task.kind != TaskKind::Forward)
    return;
  std::vector<BlockId> cands;
  for (BlockId b : task.reads)
    cands.push_back(blocks.storageOf(b));
  for (BlockId b : task.writes)
    cands.push_back(blocks.storageOf(b));
  std::sort(cands.begin(), cands.end());
  cands.erase(std::unique(cands.begin(), cands.end()), cands.end());
  for (BlockId b : cands) {
    const BlockState &bs = blocks[b];
    const Block &blk = tg.blocks[b];
    if (blocks.isResident(b) || bs.res < 0 || bs.hostValid ||
        blk.kind == BlockKind::Stats)
      continue;
    int32_t next = blocks.nextUseStep(b);
    if (next < cursor.firstBackward)
      continue; // still needed in the forward pass
    // Only while the copy engine is idle: a queue of early copies would
    // hold bytes that later allocations have to wait for.
    if (timeline.freeAt(Stream::CopyOut) > timeline.freeAt(Stream::Compute))
      return;
    double now = timeline.endOf(bs.ready);
    double gap = cursor.estimatedStart(next, now) - now;
    int64_t bytes = blocks.bytesOf(b);
    if (gap < 2 * (costs.copyOutSeconds(bytes) + costs.copyInSeconds(bytes)))
      continue;
    cause = {.kind = LeaveCause::Early,
             .step = cursor.step,
             .nextStep = next,
             .bytes = bytes,
             .gapSeconds = gap};
    copyOut(bs.res);
    offloadedAhead += bytes;
    if (offloadedAhead >= offloadTarget)
      return;
  }
}

void Scheduler::vdnnPrefetch(TaskId t) {
  // vDNN's findPrefetchLayer: the nearest earlier layer whose input was
  // offloaded and not yet prefetched; the window ends at a convolution.
  OpId l = tg.tasks[t].op;
  for (OpId id = l - 1; id >= 0; --id) {
    if (layerSync.offloaded[id] && !layerSync.prefetched[id]) {
      layerSync.prefetched[id] = true;
      for (BlockId x : tg.layers[id].dataInputs) {
        BlockId b = blocks.storageOf(x);
        if (blocks[b].res >= 0 || !blocks[b].hostValid ||
            blocks.nextUseStep(b) < 0)
          continue;
        auto a = arena.allocate(blocks.bytesOf(b), blocks.nextId());
        if (!a)
          continue; // fetched on demand when its task runs
        ResidencyId r = blocks.add(b, a->first);
        layerSync.nextLayer.push_back(copyIn(b, r, a->second));
      }
      return;
    }
    if (isConvolution(tg.layers[id].kind))
      return;
  }
}

} // namespace memfit::sched
