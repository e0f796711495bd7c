//===- ScheduleMemory.cpp - Emission, residencies and eviction ------------===//
#include "passes/schedule/Scheduler.h"

#include <algorithm>
#include <cassert>

namespace memfit::sched {

void Scheduler::addUseDeps(const StreamUses &u, std::vector<int32_t> &deps) {
  for (const LastUse &l : u)
    if (l.seq > 0)
      deps.push_back(l.seq - 1);
}

void Scheduler::touch(ResidencyId r, Stream s, int32_t instr) {
  // An input overwritten in place no longer owns its bytes; its output's
  // touch covers them.
  if (arena.find(r))
    arena.touch(r, s, {instr + 1, timeline.endOf(instr)});
}

bool Scheduler::runInPlace(const Task &task, std::vector<int32_t> &deps) {
  auto p = opts.inPlace ? inPlacePair(tg, task) : std::nullopt;
  if (!p)
    return false;
  BlockId x = p->input, y = p->output;
  // The input must be on the device and read by nothing after this task (a
  // later recompute regenerates it like any released block).
  std::span<const int32_t> usesOfX = blocks.usesOf(x);
  if (blocks[x].res < 0 || blocks[y].res >= 0 || usesOfX.empty() ||
      usesOfX.back() != cursor.step)
    return false;
  handOver(x, y, deps);
  ++plan.summary.inPlaceRuns;
  return true;
}

void Scheduler::handOver(BlockId x, BlockId y, std::vector<int32_t> &deps) {
  ResidencyId rx = blocks[x].res;
  const Arena::Segment *seg = arena.find(rx);
  assert(seg && "a resident block without bytes");
  // Whatever else touched these bytes (a copy-out of x still in flight)
  // must be done before the task overwrites them.
  addUseDeps(seg->uses, deps);
  ResidencyId ry = blocks.add(y, seg->offset);
  arena.transfer(rx, ry);
  blocks[y].res = ry;
  pricer.indexNextUse(y);
}

bool Scheduler::recomputeInPlace(TaskId producer, BlockId y,
                                 std::vector<int32_t> &deps) {
  // A re-run may overwrite its input as the round's run did, when nothing
  // reads the input again: no task ahead, no other recompute pending. A
  // ReLU re-run over the BatchNorm output it was made from then takes no
  // new bytes, where a fresh output evicted what the backward pass needed
  // next (ResNet-18's stem: its convolution's output, run a third time).
  auto p = opts.inPlace ? inPlacePair(tg, tg.tasks[producer]) : std::nullopt;
  if (!p || p->output != y)
    return false;
  BlockId x = p->input;
  if (blocks[x].res < 0 || blocks[y].res >= 0 || blocks.nextUseStep(x) >= 0 ||
      feedsPendingRecompute(x, producer))
    return false;
  handOver(x, y, deps);
  return true;
}

int32_t Scheduler::copyOut(ResidencyId r) {
  BlockId b = blocks.blockOf(r);
  BlockState &bs = blocks[b];
  int64_t bytes = blocks.residency(r).bytes;
  Instr in;
  in.kind = InstrKind::CopyOut;
  in.stream = Stream::CopyOut;
  in.residency = r;
  std::vector<int32_t> deps{bs.ready};
  addUseDeps(blocks.pending(r), deps);
  int32_t i = timeline.emit(in, costs.copyOutSeconds(bytes), deps);
  touch(r, Stream::CopyOut, i);
  noteOffload(b);
  bs.hostValid = true;
  bs.hostCopy = i;
  bs.everOffloaded = true;
  plan.summary.bytesToHost += bytes;
  return i;
}

void Scheduler::evict(ResidencyId r) {
  BlockId b = blocks.blockOf(r);
  BlockState &bs = blocks[b];
  if (!bs.hostValid && pricer.shouldDrop(b)) {
    arena.release(r, {});
    bs.res = -1;
    bs.dropped = true;
    noteDrop(b, cause);
    return;
  }
  if (!bs.hostValid)
    copyOut(r);
  arena.release(r, {});
  bs.res = -1;
}

void Scheduler::release(BlockId b) {
  BlockState &bs = blocks[b];
  if (bs.res >= 0)
    arena.release(bs.res, {});
  bs.res = -1;
  // A recompute may still need it as an input: it can be regenerated.
  if (bs.hasContent && !bs.hostValid && blocks.isRecomputable(b)) {
    bs.dropped = true;
    noteDrop(b, {.kind = LeaveCause::Released, .step = cursor.step});
  }
}

llvm::Expected<int64_t>
Scheduler::allocate(int64_t bytes, int32_t owner, StreamUses &uses,
                    std::optional<Arena::Window> found) {
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  if (!found) {
    pricer.newSearch();
    auto price = [this](int32_t o) { return pricer.price(o); };
    found = pricer.search(bytes, price);
  }
  if (found) {
    for (int32_t o : found->owners)
      evict(o);
    uses = arena.allocateAt(found->offset, bytes, owner);
    return found->offset;
  }
  if (!rules.evicts)
    return fail(llvm::formatv("no room for {0} bytes at task {1}: {2} bytes "
                              "of the {3}-byte arena are free, the largest "
                              "free run is {4}",
                              bytes,
                              quoteName(tg.tasks[order[cursor.step]].name),
                              arena.size() - arena.usedBytes(), arena.size(),
                              arena.largestFree())
                    .str());
  // Defragmentation (moDNN): evict everything the current task does not
  // need, then try again.
  std::vector<int32_t> owners;
  for (const Arena::Segment &s : arena.segments())
    if (s.owner >= 0 && s.owner < kWorkspaceOwner &&
        !blocks.isPinned(blocks.blockOf(s.owner)))
      owners.push_back(s.owner);
  cause.kind = LeaveCause::Defragment;
  for (int32_t o : owners)
    evict(o);
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  return llvm::make_error<Fragmented>(); // the caller evicts pinned blocks too
}

int32_t Scheduler::copyIn(BlockId b, ResidencyId r, const StreamUses &uses) {
  BlockState &bs = blocks[b];
  Instr in;
  in.kind = InstrKind::CopyIn;
  in.stream = Stream::CopyIn;
  in.residency = r;
  std::vector<int32_t> deps;
  addUseDeps(uses, deps);
  deps.push_back(bs.hostCopy);
  // A working copy rounded from its master sends the master.
  const int64_t bytes = blocks.residency(r).bytes;
  int32_t i = timeline.emit(in, costs.copyInSeconds(tg, b, bytes), deps);
  touch(r, Stream::CopyIn, i);
  blocks.pending(r) = {};
  bs.res = r;
  bs.ready = i;
  bs.usedSinceArrival = false;
  pricer.indexNextUse(b);
  plan.summary.bytesToDevice += tg.linkBytes(b, bytes);
  return i;
}

llvm::Error Scheduler::prepare(BlockId b, bool needsContent,
                               std::vector<int32_t> &deps) {
  BlockState &bs = blocks[b];
  if (bs.res >= 0) {
    deps.push_back(bs.ready);
    addUseDeps(blocks.pending(bs.res), deps);
    return llvm::Error::success();
  }
  if (needsContent && !bs.hostValid) {
    if (bs.dropped)
      return recompute(b, deps, 0);
    return makeInternalErrorF("{0} has no copy anywhere",
                              quoteName(tg.blocks[b].name));
  }
  StreamUses uses{};
  ResidencyId id = blocks.nextId();
  cause = {.kind = LeaveCause::ArenaFull,
           .step = cursor.step,
           .need = b,
           .bytes = blocks.bytesOf(b)};
  auto off = allocate(blocks.bytesOf(b), id, uses);
  if (!off)
    return off.takeError();
  ResidencyId r = blocks.add(b, *off);
  assert(r == id);
  if (needsContent) {
    deps.push_back(copyIn(b, r, uses));
  } else {
    blocks.pending(r) = uses;
    bs.res = r;
    pricer.indexNextUse(b);
    addUseDeps(uses, deps);
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
      BlockId sb = blocks.storageOf(x);
      run.operands.push_back(blocks.isResident(sb) ? -1 : blocks[sb].res);
    }
  std::vector<ResidencyId> ops = run.operands;
  int64_t wsBytes = run.workspaceBytes;
  int32_t i = timeline.emit(std::move(run), seconds, deps);
  for (ResidencyId r : ops)
    if (r >= 0) {
      touch(r, Stream::Compute, i);
      blocks.pending(r) = {};
    }
  if (wsBytes > 0) { // the workspace is free again once the task is done
    arena.touch(kWorkspaceOwner, Stream::Compute, {i + 1, timeline.endOf(i)});
    arena.release(kWorkspaceOwner, {});
  }
  return i;
}

llvm::Error Scheduler::prepareRecomputeOperands(TaskId t,
                                                std::vector<int32_t> &deps,
                                                int depth) {
  const Task &producer = tg.tasks[t];
  // The dropped operands are all re-run, one after the other: an input
  // the later ones need (through blocks dropped with no use ahead, such as
  // a frozen prefix's) stays for them (feedsChain). Without this a chain
  // through GoogLeNet's nine four-branch modules re-ran its stem 4^9 times.
  std::vector<BlockId> wanted;
  for (BlockId x : producer.reads)
    if (BlockId sb = blocks.storageOf(x); blocks.isDroppedOut(sb)) {
      ++blocks[sb].chainWanted;
      wanted.push_back(sb);
    }
  chainWants += static_cast<int32_t>(wanted.size());
  auto unwant = [&]() {
    for (BlockId sb : wanted)
      --blocks[sb].chainWanted;
    chainWants -= static_cast<int32_t>(wanted.size());
  };
  for (BlockId x : producer.reads) {
    BlockId sb = blocks.storageOf(x);
    if (blocks.isResident(sb))
      continue;
    llvm::Error err = blocks.isDroppedOut(sb) ? recompute(sb, deps, depth + 1)
                                              : prepare(sb, true, deps);
    if (err) {
      unwant();
      return err;
    }
  }
  unwant();
  // Saved statistics are read again; the output gets a fresh residency.
  for (BlockId x : producer.writes) {
    BlockId sb = blocks.storageOf(x);
    if (blocks.isResident(sb))
      continue;
    bool isStats = tg.blocks[sb].kind == BlockKind::Stats;
    if (!isStats && blocks[sb].res >= 0) {
      deps.push_back(blocks[sb].ready);
      continue;
    }
    if (!isStats && recomputeInPlace(t, sb, deps))
      continue;
    if (auto err = prepare(sb, isStats, deps))
      return err;
  }
  return llvm::Error::success();
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
  TaskId producer = tg.blocks[b].writers[0];
  const Task &task = tg.tasks[producer];
  std::vector<BlockId> pins;
  for (const auto *list : {&task.reads, &task.writes})
    for (BlockId x : *list) {
      BlockId sb = blocks.storageOf(x);
      if (!blocks.isResident(sb)) {
        blocks.pin(sb);
        pins.push_back(sb);
      }
    }
  auto unpin = [&]() {
    for (BlockId sb : pins)
      blocks.unpin(sb);
  };
  std::vector<int32_t> runDeps;
  if (auto err = prepareRecomputeOperands(producer, runDeps, depth)) {
    unpin();
    return err;
  }
  Instr run;
  run.kind = InstrKind::Run;
  run.stream = Stream::Compute;
  run.task = producer;
  run.recompute = true;
  const AlgoCost *ac = &costs.baseline(producer);
  const AlgoCost &fast = costs.fastest(producer);
  if (fast.workspace == 0 || alignUp(fast.workspace) <= arena.largestFree())
    ac = &fast;
  run.algo = ac->algo;
  if (ac->workspace > 0) {
    auto a = arena.allocate(ac->workspace, kWorkspaceOwner);
    assert(a && "checked above");
    run.workspaceOffset = a->first;
    run.workspaceBytes = ac->workspace;
    addUseDeps(a->second, runDeps);
  }
  int32_t i = emitRun(std::move(run), ac->seconds, runDeps);
  for (BlockId x : task.writes) {
    BlockId sb = blocks.storageOf(x);
    if (blocks.isResident(sb) || tg.blocks[sb].kind == BlockKind::Stats)
      continue;
    BlockState &bs = blocks[sb];
    bs.ready = i;
    bs.dropped = false;
    bs.usedSinceArrival = false;
  }
  for (BlockId x : task.reads)
    blocks[blocks.storageOf(x)].usedSinceArrival = true;
  unpin();
  // Inputs brought back only for this recompute leave again, unless
  // another recompute still to come reads them (a DenseNet's concatenations
  // read every earlier feature map of their block: releasing each after one
  // concatenation made it run again for the next). Those stay until an
  // eviction prices them out.
  for (BlockId x : task.reads) {
    BlockId sb = blocks.storageOf(x);
    if (!blocks.isResident(sb) && blocks[sb].res >= 0 && !blocks.isPinned(sb) &&
        blocks.nextUseStep(sb) < 0 && !feedsPendingRecompute(sb))
      release(sb);
  }
  ++plan.summary.recomputes;
  plan.decisions[b] = BlockDecision::Recompute;
  deps.push_back(i);
  return llvm::Error::success();
}

bool Scheduler::feedsPendingRecompute(BlockId b, TaskId except) const {
  // A forward reader of b whose output is dropped and still needed.
  for (TaskId r : tg.blocks[b].readers) {
    if (r == except || tg.tasks[r].kind != TaskKind::Forward)
      continue;
    for (BlockId y : tg.tasks[r].writes) {
      BlockId sy = blocks.storageOf(y);
      if (sy != b && blocks.isDroppedOut(sy) &&
          (blocks.nextUseStep(sy) >= 0 || feedsChain(sy)))
        return true;
    }
  }
  return false;
}

bool Scheduler::feedsChain(BlockId y) const {
  if (chainWants == 0)
    return false;
  // Forward through dropped blocks, to one a recompute in progress re-runs.
  ++chainStamp;
  chainSeen.resize(tg.blocks.size(), 0);
  chainStack.assign(1, y);
  chainSeen[y] = chainStamp;
  while (!chainStack.empty()) {
    BlockId x = chainStack.back();
    chainStack.pop_back();
    if (blocks[x].chainWanted > 0)
      return true;
    for (TaskId r : tg.blocks[x].readers) {
      if (tg.tasks[r].kind != TaskKind::Forward)
        continue;
      for (BlockId z : tg.tasks[r].writes) {
        BlockId sz = blocks.storageOf(z);
        if (chainSeen[sz] == chainStamp || !blocks.isDroppedOut(sz))
          continue;
        chainSeen[sz] = chainStamp;
        chainStack.push_back(sz);
      }
    }
  }
  return false;
}

void Scheduler::offloadForced(TaskId t) {
  if (opts.offloadAfterForward.empty() || tg.tasks[t].kind != TaskKind::Forward)
    return;
  for (BlockId x : tg.tasks[t].writes) {
    BlockId sb = blocks.storageOf(x);
    if (blocks.isResident(sb) || !opts.offloadAfterForward[sb])
      continue;
    const BlockState &bs = blocks[sb];
    // As soon as it is made, even where later forward tasks still read it:
    // the copy overlaps them, and the device copy can leave for free after
    // the last of them.
    if (bs.res < 0 || bs.hostValid || blocks.nextUseStep(sb) < 0)
      continue;
    cause = {.kind = LeaveCause::Solver,
             .step = cursor.step,
             .nextStep = blocks.nextUseStep(sb),
             .bytes = blocks.bytesOf(sb)};
    copyOut(bs.res);
  }
}

void Scheduler::leaveAfterStep(const std::vector<BlockId> &touched) {
  if (opts.offloadLeaveAfter.empty())
    return;
  for (BlockId sb : touched) {
    BlockState &bs = blocks[sb];
    const std::vector<int32_t> &after = opts.offloadLeaveAfter[sb];
    if (!std::binary_search(after.begin(), after.end(), cursor.step) ||
        bs.res < 0 || blocks.isPinned(sb) || blocks.nextUseStep(sb) < 0)
      continue;
    if (!bs.hostValid) {
      cause = {.kind = LeaveCause::Solver,
               .step = cursor.step,
               .nextStep = blocks.nextUseStep(sb),
               .bytes = blocks.bytesOf(sb)};
      copyOut(bs.res);
    }
    evict(bs.res);
  }
}

void Scheduler::dropForwardDone(TaskId t) {
  // Chen et al. / SuperNeurons: a block in the drop set leaves the device
  // after its last forward use; the backward pass recomputes it.
  if (opts.dropAfterForward.empty() || tg.tasks[t].kind != TaskKind::Forward)
    return;
  for (const auto *list : {&tg.tasks[t].reads, &tg.tasks[t].writes})
    for (BlockId x : *list) {
      BlockId sb = blocks.storageOf(x);
      BlockState &bs = blocks[sb];
      if (!opts.dropAfterForward[sb] || !blocks.isRecomputable(sb) ||
          bs.res < 0 || blocks.isPinned(sb))
        continue;
      int32_t next = blocks.nextUseStep(sb);
      if (next < 0 || next < cursor.firstBackward)
        continue;
      arena.release(bs.res, {});
      bs.res = -1;
      bs.dropped = true;
      noteDrop(sb, {.kind = LeaveCause::DropSet, .step = cursor.step});
    }
}

} // namespace memfit::sched
