//===- ScheduleMemory.cpp - Emission, residencies and eviction ------------===//
#include "passes/Scheduler.h"

#include <cassert>

namespace memfit::sched {

void Scheduler::waitFor(Stream s, int32_t dep, double &earliest) {
  if (dep < 0)
    return;
  const Timing &d = timing[dep];
  earliest = std::max(earliest, d.end);
  Stream ds = instrs[dep].stream;
  if (ds == s)
    return;
  if (clk[si(s)][si(ds)] >= d.after[si(ds)])
    return; // already ordered through an earlier wait
  if (timing[dep].recordAfter < 0)
    timing[dep].recordAfter = numEvents++;
  Instr w;
  w.kind = InstrKind::Wait;
  w.stream = s;
  w.event = timing[dep].recordAfter;
  instrs.push_back(w);
  Timing wt;
  wt.start = wt.end = 0; // waits take no time of their own
  for (int k = 0; k < kNumStreams; ++k)
    clk[si(s)][k] = std::max(clk[si(s)][k], d.after[k]);
  wt.after = clk[si(s)];
  timing.push_back(wt);
}

int32_t Scheduler::emit(Instr in, double duration,
                        const std::vector<int32_t> &deps) {
  double earliest = streamFree[si(in.stream)];
  for (int32_t d : deps)
    waitFor(in.stream, d, earliest);
  auto idx = static_cast<int32_t>(instrs.size());
  Timing t;
  t.start = earliest;
  t.end = earliest + duration;
  clk[si(in.stream)][si(in.stream)] = idx + 1;
  t.after = clk[si(in.stream)];
  streamFree[si(in.stream)] = t.end;
  lastOn[si(in.stream)] = idx;
  instrs.push_back(std::move(in));
  timing.push_back(t);
  return idx;
}

std::vector<int32_t> Scheduler::usesToDeps(const StreamUses &u) const {
  std::vector<int32_t> deps;
  for (const LastUse &l : u)
    if (l.seq > 0)
      deps.push_back(l.seq - 1);
  return deps;
}

ResidencyId Scheduler::newResidency(BlockId b, int64_t offset) {
  Residency r;
  r.block = b;
  r.offset = offset;
  r.bytes = bytesOf(b);
  plan.residencies.push_back(r);
  pending.emplace_back();
  return static_cast<ResidencyId>(plan.residencies.size() - 1);
}

void Scheduler::touch(ResidencyId r, Stream s, int32_t instr) {
  // An input overwritten in place no longer owns its bytes; its output's
  // touch covers them.
  if (arena.find(r))
    arena.touch(r, s, {instr + 1, timing[instr].end});
}

bool Scheduler::runInPlace(const Task &task, std::vector<int32_t> &deps) {
  auto p = opts.inPlace ? inPlacePair(tg, task) : std::nullopt;
  if (!p)
    return false;
  BlockId x = p->input, y = p->output;
  // The input must be on the device and read by nothing after this task (a
  // later recompute regenerates it like any released block).
  if (st[x].res < 0 || st[y].res >= 0 || uses[x].empty() ||
      uses[x].back() != step)
    return false;
  ResidencyId rx = st[x].res;
  const Arena::Segment *seg = arena.find(rx);
  assert(seg && "a resident block without bytes");
  // Whatever else touched these bytes (a copy-out of x still in flight)
  // must be done before the task overwrites them.
  for (int32_t d : usesToDeps(seg->uses))
    deps.push_back(d);
  ResidencyId ry = newResidency(y, seg->offset);
  arena.transfer(rx, ry);
  st[y].res = ry;
  indexNextUse(y);
  ++plan.summary.inPlaceRuns;
  return true;
}

bool Scheduler::evictable(int32_t owner) const {
  if (owner >= kWorkspaceOwner)
    return false;
  BlockId b = plan.residencies[owner].block;
  if (pinned[b])
    return false;
  if (isVdnn())
    return false; // vDNN offloads by its fixed rule only
  // Chen et al. never copy: only what can be recomputed (or already has a
  // host copy) may leave. SuperNeurons also offloads convolution outputs.
  if (opts.policy == Policy::ChenSqrt && !droppable[b] && !st[b].hostValid)
    return false;
  if (opts.policy == Policy::SuperNeurons && !droppable[b] && !st[b].hostValid)
    return false;
  // moDNN's criteria: not used by the next task; used since it arrived.
  int32_t next = nextUseStep(b);
  if (next == step + 1 && opts.policy == Policy::Modnn)
    return false;
  if (!st[b].usedSinceArrival)
    return false;
  return true;
}

Arena::SlotPrice Scheduler::slotPrice(int32_t owner) const {
  Arena::SlotPrice p;
  if (!evictableMemo(owner))
    return p;
  p.usable = true;
  const Residency &r = plan.residencies[owner];
  const BlockState &bs = st[r.block];
  double drop = bs.hostValid ? -1.0 : dropMemo(r.block);
  if (drop >= 0) {
    // Dropped: no copy now, a recompute later.
    p.penalty = drop;
    return p;
  }
  if (!bs.hostValid) {
    p.copies = true;
    p.readyAt = bs.ready >= 0 ? timing[bs.ready].end : 0;
    p.copySeconds = costs.copyOutSeconds(r.bytes);
    p.moved += r.bytes;
  }
  if (opts.policy == Policy::Memfit) {
    // Evicting what is needed soon costs a prefetch that may not hide.
    int32_t next = nextUseStep(r.block);
    if (next >= 0) {
      double now = streamFree[si(Stream::Compute)];
      double gap = est(next, now) - now;
      p.penalty = std::max(0.0, costs.copyInSeconds(r.bytes) - gap);
      p.moved += r.bytes;
    }
  }
  return p;
}

Arena::PriceClock Scheduler::priceClock() const {
  return {streamFree[si(Stream::Compute)], streamFree[si(Stream::CopyOut)]};
}

bool Scheduler::evictableMemo(int32_t owner) const {
  if (owner >= kWorkspaceOwner)
    return false;
  if (evictCache.size() <= static_cast<size_t>(owner))
    evictCache.resize(plan.residencies.size(), {0, false});
  auto &c = evictCache[owner];
  if (c.first != epoch)
    c = {epoch, evictable(owner)};
  return c.second;
}

double Scheduler::dropMemo(BlockId b) const {
  if (dropCache.size() < tg.blocks.size())
    dropCache.resize(tg.blocks.size(), {0, -1.0});
  auto &c = dropCache[b];
  if (c.first != epoch)
    c = {epoch, shouldDrop(b) ? recomputeSeconds(b, 0) : -1.0};
  return c.second;
}

double Scheduler::recomputeSeconds(BlockId b, int depth) const {
  // The producer's run, plus recomputing its inputs that are dropped too
  // (a few levels deep; beyond that the chain is priced as long).
  TaskId t = tg.blocks[b].writers[0];
  double secs = costs.fastest(t).seconds;
  if (depth >= 3)
    return 4 * secs;
  for (BlockId in : tg.tasks[t].reads) {
    BlockId sb = storageOfB(in);
    if (!weightSide[sb] && st[sb].res < 0 && st[sb].dropped)
      secs += recomputeSeconds(sb, depth + 1);
  }
  return secs;
}

bool Scheduler::shouldDrop(BlockId b) const {
  if (!droppable[b])
    return false;
  switch (opts.policy) {
  case Policy::ChenSqrt:
    return true;
  case Policy::SuperNeurons:
    return !isConvOutput[b]; // convolution outputs are checkpoints
  case Policy::Memfit: {
    // Drop when regenerating is cheaper than the copy-out that would delay
    // this task plus the prefetch that may not hide later; only what the
    // backward pass needs next, so the forward pass never waits on a
    // recompute chain.
    int32_t next = nextUseStep(b);
    if (!opts.allowRecompute || (next >= 0 && next < firstBackward))
      return false;
    double now = streamFree[si(Stream::Compute)];
    double offload = costs.copyOutSeconds(bytesOf(b));
    if (next >= 0)
      offload += std::max(0.0, costs.copyInSeconds(bytesOf(b)) -
                                   (est(next, now) - now));
    return recomputeSeconds(b, 0) < offload;
  }
  default:
    return false;
  }
}

void Scheduler::evict(ResidencyId r) {
  BlockId b = plan.residencies[r].block;
  BlockState &bs = st[b];
  if (!bs.hostValid && shouldDrop(b)) {
    arena.release(r, {});
    bs.res = -1;
    bs.dropped = true;
    noteDrop(b, cause);
    return;
  }
  if (!bs.hostValid) {
    Instr in;
    in.kind = InstrKind::CopyOut;
    in.stream = Stream::CopyOut;
    in.residency = r;
    std::vector<int32_t> deps{bs.ready};
    for (int32_t d : usesToDeps(pending[r]))
      deps.push_back(d);
    int32_t i = emit(in, costs.copyOutSeconds(plan.residencies[r].bytes), deps);
    touch(r, Stream::CopyOut, i);
    noteOffload(b);
    bs.hostValid = true;
    bs.hostCopy = i;
    bs.everOffloaded = true;
    plan.summary.bytesToHost += plan.residencies[r].bytes;
  }
  arena.release(r, {});
  bs.res = -1;
}

void Scheduler::release(BlockId b) {
  BlockState &bs = st[b];
  if (bs.res >= 0)
    arena.release(bs.res, {});
  bs.res = -1;
  // A recompute may still need it as an input: it can be regenerated.
  if (bs.hasContent && !bs.hostValid && droppable[b]) {
    bs.dropped = true;
    noteDrop(b, {LeaveCause::Released, step, -1, -1, 0, 0});
  }
}

llvm::Expected<int64_t> Scheduler::allocate(int64_t bytes, int32_t owner,
                                            StreamUses &uses) {
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  newSearch();
  auto price = [this](int32_t o) { return slotPrice(o); };
  if (auto w = searchEviction(bytes, price)) {
    for (int32_t o : w->owners)
      evict(o);
    uses = arena.allocateAt(w->offset, bytes, owner);
    return w->offset;
  }
  if (isVdnn())
    return fail(llvm::formatv("no room for {0} bytes at task {1}: {2} bytes "
                              "of the {3}-byte arena are free, the largest "
                              "free run is {4}",
                              bytes, quoteName(tg.tasks[order[step]].name),
                              arena.size() - arena.usedBytes(), arena.size(),
                              arena.largestFree())
                    .str());
  // Defragmentation (moDNN): evict everything the current task does not
  // need, then try again.
  std::vector<int32_t> owners;
  for (const Arena::Segment &s : arena.segments())
    if (s.owner >= 0 && s.owner < kWorkspaceOwner &&
        !pinned[plan.residencies[s.owner].block])
      owners.push_back(s.owner);
  cause.kind = LeaveCause::Defragment;
  for (int32_t o : owners)
    evict(o);
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  return makeError("fragmented"); // the caller evicts pinned blocks too
}

int32_t Scheduler::farthestKey(BlockId b) const {
  int32_t next = nextUseStep(b);
  return next < 0 ? std::numeric_limits<int32_t>::max() : next;
}

void Scheduler::indexNextUse(BlockId b) {
  if (st[b].res >= 0)
    farthest.push({farthestKey(b), st[b].res});
}

std::optional<Arena::Window> Scheduler::searchEviction(
    int64_t bytes, const std::function<Arena::SlotPrice(int32_t)> &price) {
  if (arena.segmentCount() <= kExactSearchSegments)
    return arena.findEviction(bytes, priceClock(), price);
  // The farthest next uses first (Belady's victims): take up to
  // kFocusOwners that may leave, look at a bounded number of entries, and
  // put back the live ones.
  ++focusSearch;
  std::vector<int32_t> focus;
  std::vector<std::pair<int32_t, ResidencyId>> keep;
  size_t looked = 0;
  while (!farthest.empty() && focus.size() < kFocusOwners &&
         looked < 16 * kFocusOwners) {
    auto [key, r] = farthest.top();
    farthest.pop();
    BlockId b = plan.residencies[r].block;
    if (st[b].res != r || key != farthestKey(b))
      continue; // stale
    if (focusSeen.size() <= static_cast<size_t>(r))
      focusSeen.resize(plan.residencies.size(), 0);
    if (focusSeen[r] == focusSearch)
      continue; // a duplicate: one entry is enough
    focusSeen[r] = focusSearch;
    ++looked;
    keep.push_back({key, r});
    if (price(r).usable)
      focus.push_back(r);
  }
  for (const auto &e : keep)
    farthest.push(e);
  return arena.findEviction(bytes, priceClock(), price, &focus);
}

int32_t Scheduler::copyIn(BlockId b, ResidencyId r, const StreamUses &uses) {
  BlockState &bs = st[b];
  Instr in;
  in.kind = InstrKind::CopyIn;
  in.stream = Stream::CopyIn;
  in.residency = r;
  std::vector<int32_t> deps = usesToDeps(uses);
  deps.push_back(bs.hostCopy);
  int32_t i = emit(in, costs.copyInSeconds(plan.residencies[r].bytes), deps);
  touch(r, Stream::CopyIn, i);
  pending[r] = {};
  bs.res = r;
  bs.ready = i;
  bs.usedSinceArrival = false;
  indexNextUse(b);
  plan.summary.bytesToDevice += plan.residencies[r].bytes;
  return i;
}

llvm::Error Scheduler::prepare(BlockId b, bool needsContent,
                               std::vector<int32_t> &deps) {
  BlockState &bs = st[b];
  if (bs.res >= 0) {
    deps.push_back(bs.ready);
    for (int32_t d : usesToDeps(pending[bs.res]))
      deps.push_back(d);
    return llvm::Error::success();
  }
  if (needsContent && !bs.hostValid) {
    if (bs.dropped)
      return recompute(b, deps, 0);
    return makeErrorF("internal: {0} has no copy anywhere",
                      quoteName(tg.blocks[b].name));
  }
  StreamUses uses{};
  auto ownerId = static_cast<int32_t>(plan.residencies.size());
  cause = {LeaveCause::ArenaFull, step, b, -1, bytesOf(b), 0};
  auto off = allocate(bytesOf(b), ownerId, uses);
  if (!off)
    return off.takeError();
  ResidencyId r = newResidency(b, *off);
  assert(r == ownerId);
  if (needsContent) {
    deps.push_back(copyIn(b, r, uses));
  } else {
    pending[r] = uses;
    bs.res = r;
    indexNextUse(b);
    for (int32_t d : usesToDeps(uses))
      deps.push_back(d);
  }
  return llvm::Error::success();
}

int32_t Scheduler::emitRun(Instr run, double seconds,
                           const std::vector<int32_t> &deps) {
  // Operands: the residency of each block in task.reads then task.writes.
  const Task &t = tg.tasks[run.task];
  run.operands.clear();
  for (const auto *list : {&t.reads, &t.writes})
    for (BlockId x : *list) {
      BlockId sb = storageOfB(x);
      run.operands.push_back(weightSide[sb] ? -1 : st[sb].res);
    }
  std::vector<ResidencyId> ops = run.operands;
  int64_t wsBytes = run.workspaceBytes;
  int32_t i = emit(std::move(run), seconds, deps);
  for (ResidencyId r : ops)
    if (r >= 0) {
      touch(r, Stream::Compute, i);
      pending[r] = {};
    }
  if (wsBytes > 0) { // the workspace is free again once the task is done
    arena.touch(kWorkspaceOwner, Stream::Compute, {i + 1, timing[i].end});
    arena.release(kWorkspaceOwner, {});
  }
  return i;
}

llvm::Error Scheduler::recompute(BlockId b, std::vector<int32_t> &deps,
                                 int depth) {
  // Each level is a stack frame: refuse chains that could exhaust the stack
  // (a drop set that keeps too little on a very deep network).
  if (depth > kMaxRecomputeDepth)
    return fail(llvm::formatv("recomputing {0} needs a chain of more than {1} "
                              "dropped blocks: the drop set keeps too little",
                              quoteName(tg.blocks[b].name), kMaxRecomputeDepth)
                    .str());
  TaskId tp = tg.blocks[b].writers[0];
  const Task &t = tg.tasks[tp];
  std::vector<BlockId> pins;
  auto pin = [&](BlockId sb) {
    ++pinned[sb];
    pins.push_back(sb);
  };
  for (const auto *list : {&t.reads, &t.writes})
    for (BlockId x : *list) {
      BlockId sb = storageOfB(x);
      if (!weightSide[sb])
        pin(sb);
    }
  std::vector<int32_t> rdeps;
  auto unpin = [&]() {
    for (BlockId sb : pins)
      --pinned[sb];
  };
  for (BlockId x : t.reads) {
    BlockId sb = storageOfB(x);
    if (weightSide[sb])
      continue;
    llvm::Error err = st[sb].res < 0 && st[sb].dropped
                          ? recompute(sb, rdeps, depth + 1)
                          : prepare(sb, true, rdeps);
    if (err) {
      unpin();
      return err;
    }
  }
  // Saved statistics are read again; the output gets a fresh residency.
  for (BlockId x : t.writes) {
    BlockId sb = storageOfB(x);
    if (weightSide[sb])
      continue;
    bool isStats = tg.blocks[sb].kind == BlockKind::Stats;
    if (!isStats && st[sb].res >= 0) {
      rdeps.push_back(st[sb].ready);
      continue;
    }
    if (auto err = prepare(sb, isStats, rdeps)) {
      unpin();
      return err;
    }
  }
  Instr run;
  run.kind = InstrKind::Run;
  run.stream = Stream::Compute;
  run.task = tp;
  run.recompute = true;
  const AlgoCost *ac = &costs.baseline(tp);
  const AlgoCost &fast = costs.fastest(tp);
  if (fast.workspace == 0 || alignUp(fast.workspace) <= arena.largestFree())
    ac = &fast;
  run.algo = ac->algo;
  if (ac->workspace > 0) {
    auto a = arena.allocate(ac->workspace, kWorkspaceOwner);
    assert(a && "checked above");
    run.workspaceOffset = a->first;
    run.workspaceBytes = ac->workspace;
    for (int32_t d : usesToDeps(a->second))
      rdeps.push_back(d);
  }
  int32_t i = emitRun(std::move(run), ac->seconds, rdeps);
  for (BlockId x : t.writes) {
    BlockId sb = storageOfB(x);
    if (weightSide[sb] || tg.blocks[sb].kind == BlockKind::Stats)
      continue;
    BlockState &bs = st[sb];
    bs.ready = i;
    bs.dropped = false;
    bs.usedSinceArrival = false;
  }
  for (BlockId x : t.reads)
    st[storageOfB(x)].usedSinceArrival = true;
  unpin();
  // Inputs brought back only for this recompute leave again.
  for (BlockId x : t.reads) {
    BlockId sb = storageOfB(x);
    if (!weightSide[sb] && st[sb].res >= 0 && pinned[sb] == 0 &&
        nextUseStep(sb) < 0)
      release(sb);
  }
  ++plan.summary.recomputes;
  plan.decisions[b] = BlockDecision::Recompute;
  deps.push_back(i);
  return llvm::Error::success();
}

void Scheduler::dropForwardDone(TaskId t) {
  // Chen et al. / SuperNeurons: a block in the drop set leaves the device
  // after its last forward use; the backward pass recomputes it.
  if (opts.dropAfterForward.empty() || tg.tasks[t].kind != TaskKind::Forward)
    return;
  for (const auto *list : {&tg.tasks[t].reads, &tg.tasks[t].writes})
    for (BlockId x : *list) {
      BlockId sb = storageOfB(x);
      BlockState &bs = st[sb];
      if (!opts.dropAfterForward[sb] || !droppable[sb] || bs.res < 0 ||
          pinned[sb])
        continue;
      int32_t next = nextUseStep(sb);
      if (next < 0 || next < firstBackward)
        continue;
      arena.release(bs.res, {});
      bs.res = -1;
      bs.dropped = true;
      noteDrop(sb, {LeaveCause::DropSet, step, -1, -1, 0, 0});
    }
}

} // namespace memfit::sched
