//===- EvictionPricer.cpp - Who may leave the arena, and at what price ----===//
#include "passes/schedule/EvictionPricer.h"

#include <cassert>
#include <limits>

namespace memfit::sched {

bool EvictionPricer::evictable(int32_t owner) const {
  // Workspaces never leave; under vDNN nothing does (it offloads by its
  // fixed rule only).
  if (owner >= kWorkspaceOwner || !rules.evicts)
    return false;
  BlockId b = blocks.blockOf(owner);
  if (blocks.isPinned(b))
    return false;
  // Chen et al. never copy: only what can be recomputed (or already has a
  // host copy) may leave. SuperNeurons also offloads convolution outputs.
  if (rules.evictsRecomputableOrCopiedOnly && !blocks.isRecomputable(b) &&
      !blocks[b].hostValid)
    return false;
  // moDNN's criteria: used since it arrived; not used by the next task
  // (the next use is looked up only under that rule: it is one more load,
  // for every occupant a search looks at).
  if (!blocks[b].usedSinceArrival)
    return false;
  if (rules.keepsNextTaskBlocks && blocks.nextUseStep(b) == cursor.step + 1)
    return false;
  return true;
}

bool EvictionPricer::mayLeave(int32_t owner) const {
  if (owner >= kWorkspaceOwner)
    return false;
  if (evictCache.size() <= static_cast<size_t>(owner))
    evictCache.resize(blocks.nextId(), {0, false});
  auto &c = evictCache[owner];
  if (c.first != epoch)
    c = {epoch, evictable(owner)};
  return c.second;
}

Arena::SlotPrice EvictionPricer::price(int32_t owner) const {
  Arena::SlotPrice p;
  if (!mayLeave(owner))
    return p;
  p.usable = true;
  const Residency &r = blocks.residency(owner);
  const BlockState &bs = blocks[r.block];
  double drop = bs.hostValid ? -1.0 : dropSeconds(r.block);
  if (drop >= 0) {
    // Dropped: no copy now, a recompute later.
    p.penalty = drop;
    return p;
  }
  if (!bs.hostValid) {
    p.copies = true;
    p.readyAt = bs.ready >= 0 ? timeline.endOf(bs.ready) : 0;
    p.copySeconds = costs.copyOutSeconds(r.bytes);
    p.moved += r.bytes;
  }
  if (rules.pricesLatePrefetch) {
    // Evicting what is needed soon costs a prefetch that may not hide.
    int32_t next = blocks.nextUseStep(r.block);
    if (next >= 0) {
      p.penalty = std::max(0.0, costs.copyInSeconds(tg, r.block, r.bytes) -
                                    gapUntil(next));
      p.moved += r.bytes;
    }
  }
  return p;
}

double EvictionPricer::dropSeconds(BlockId b) const {
  if (dropCache.size() < tg.blocks.size())
    dropCache.resize(tg.blocks.size(), {0, -1.0});
  auto &c = dropCache[b];
  if (c.first != epoch)
    c = {epoch, dropPrice(b)};
  return c.second;
}

double EvictionPricer::recomputeSeconds(BlockId b, double enough) const {
  // The producer's run, plus recomputing its inputs that are dropped too,
  // and theirs: the whole chain back to what is resident or has a host
  // copy, each producer once. A chain cut short (the old rule priced three
  // levels) made evicting the boundary of a long recomputed span look
  // cheap, and the span then ran again.
  if (taskSeen.size() < tg.tasks.size())
    taskSeen.assign(tg.tasks.size(), 0);
  ++seenStamp;
  std::vector<TaskId> &stack = chainStack;
  stack.clear();
  auto visit = [&](BlockId x) {
    TaskId w = tg.blocks[x].writers[0];
    if (taskSeen[w] != seenStamp) {
      taskSeen[w] = seenStamp;
      stack.push_back(w);
    }
  };
  visit(b);
  double secs = 0;
  size_t runs = 0;
  while (!stack.empty()) {
    TaskId t = stack.back();
    stack.pop_back();
    secs += costs.fastest(t).seconds;
    // Beyond this many runs the chain is long enough: the price is already
    // far above what an eviction is worth. A caller that only compares
    // with `enough` stops there too.
    if (++runs >= kMaxPricedChain || secs >= enough)
      break;
    for (BlockId sb : blocks.readsOfTask(t))
      if (blocks[sb].res < 0 && blocks[sb].dropped)
        visit(sb);
  }
  return secs;
}

bool EvictionPricer::shouldDrop(BlockId b) const { return dropPrice(b) >= 0; }

double EvictionPricer::dropPrice(BlockId b) const {
  if (!blocks.isRecomputable(b))
    return -1.0;
  switch (rules.drop) {
  case PolicyRules::Drop::Always:
    return recomputeSeconds(b);
  case PolicyRules::Drop::NonConv:
    // Convolution outputs are checkpoints.
    return blocks.isConvOutput(b) ? -1.0 : recomputeSeconds(b);
  case PolicyRules::Drop::WhenCheaper: {
    // Drop when regenerating is cheaper than the copy-out that would delay
    // this task plus the prefetch that may not hide later; only what the
    // backward pass needs next, so the forward pass never waits on a
    // recompute chain.
    int32_t next = blocks.nextUseStep(b);
    if (!allowRecompute || (next >= 0 && next < cursor.firstBackward))
      return -1.0;
    int64_t bytes = blocks.bytesOf(b);
    double offload = costs.copyOutSeconds(bytes);
    if (next >= 0)
      offload += std::max(0.0, costs.copyInSeconds(bytes) - gapUntil(next));
    double secs = recomputeSeconds(b, offload);
    return secs < offload ? secs : -1.0;
  }
  case PolicyRules::Drop::Never:
    break;
  }
  return -1.0;
}

int32_t EvictionPricer::farthestKey(BlockId b) const {
  int32_t next = blocks.nextUseStep(b);
  return next < 0 ? std::numeric_limits<int32_t>::max() : next;
}

void EvictionPricer::indexNextUse(BlockId b) {
  std::optional<NextUseIndex::iterator> &entry = entryOf[b];
  if (entry) {
    farthest.erase(*entry);
    entry.reset();
  }
  if (blocks[b].res >= 0)
    entry = farthest.insert({farthestKey(b), blocks[b].res}).first;
}

void EvictionPricer::farthestUsable(const PriceFn &price,
                                    std::vector<int32_t> &focus) {
  // Take up to kFocusOwners that may leave, looking at a bounded number of
  // live entries.
  focus.clear();
  size_t looked = 0;
  for (auto it = farthest.begin(); it != farthest.end() &&
                                   focus.size() < kFocusOwners &&
                                   looked < 16 * kFocusOwners;) {
    auto [key, r] = *it;
    BlockId b = blocks.blockOf(r);
    if (blocks[b].res != r || key != farthestKey(b)) {
      assert(entryOf[b] && *entryOf[b] == it && "one entry per block");
      entryOf[b].reset();
      it = farthest.erase(it); // stale
      continue;
    }
    ++looked;
    if (price(r).usable)
      focus.push_back(r);
    ++it;
  }
}

std::optional<Arena::Window> EvictionPricer::search(int64_t bytes,
                                                    const PriceFn &price) {
  Arena::PriceClock clock{timeline.freeAt(Stream::Compute),
                          timeline.freeAt(Stream::CopyOut)};
  if (arena.segmentCount() <= kExactSearchSegments)
    return arena.findEviction(bytes, clock, price);
  // The farthest next uses first (Belady's victims).
  farthestUsable(price, focus);
  return arena.findEviction(bytes, clock, price, &focus);
}

} // namespace memfit::sched
