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
  arena.touch(r, s, {instr + 1, timing[instr].end});
}

bool Scheduler::evictable(int32_t owner) const {
  if (owner >= kWorkspaceOwner)
    return false;
  BlockId b = plan.residencies[owner].block;
  if (pinned[b])
    return false;
  if (isVdnn())
    return false; // vDNN offloads by its fixed rule only
  // moDNN's criteria: not used by the next task; used since it arrived.
  int32_t next = nextUseStep(b);
  if (next == step + 1 && opts.policy == Policy::Modnn)
    return false;
  if (!st[b].usedSinceArrival)
    return false;
  return true;
}

double Scheduler::evictionPrice(const Arena::Window &w) const {
  double now = streamFree[si(Stream::Compute)];
  double copyEnd = streamFree[si(Stream::CopyOut)];
  double regionFree = 0;
  int64_t moved = 0;
  double penalty = 0;
  for (const LastUse &u : w.freeUses)
    regionFree = std::max(regionFree, u.end);
  for (int32_t owner : w.owners) {
    const Residency &r = plan.residencies[owner];
    const BlockState &bs = st[r.block];
    if (const Arena::Segment *seg = arena.find(owner))
      for (const LastUse &u : seg->uses)
        regionFree = std::max(regionFree, u.end);
    if (!bs.hostValid) {
      double ready = bs.ready >= 0 ? timing[bs.ready].end : 0;
      copyEnd = std::max(copyEnd, ready) + costs.copyOutSeconds(r.bytes);
      regionFree = std::max(regionFree, copyEnd);
      moved += r.bytes;
    }
    if (opts.policy == Policy::Memfit) {
      // Evicting what is needed soon costs a prefetch that may not hide.
      int32_t next = nextUseStep(r.block);
      if (next >= 0) {
        double gap = est(next, now) - now;
        penalty += std::max(0.0, costs.copyInSeconds(r.bytes) - gap);
        moved += r.bytes;
      }
    }
  }
  double delay = std::max(0.0, regionFree - now);
  // Bytes moved break ties, so equal delays prefer less PCIe traffic.
  return delay + penalty + 1e-15 * static_cast<double>(moved);
}

void Scheduler::evict(ResidencyId r) {
  BlockId b = plan.residencies[r].block;
  BlockState &bs = st[b];
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
}

llvm::Expected<int64_t> Scheduler::allocate(int64_t bytes, int32_t owner,
                                            StreamUses &uses) {
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  auto ev = [this](int32_t o) { return evictable(o); };
  auto price = [this](const Arena::Window &w) { return evictionPrice(w); };
  if (auto w = arena.findEviction(bytes, ev, price)) {
    for (int32_t o : w->owners)
      evict(o);
    uses = arena.allocateAt(w->offset, bytes, owner);
    return w->offset;
  }
  if (isVdnn())
    return fail(llvm::formatv("no room for {0} bytes at task {1}", bytes,
                              quoteName(tg.tasks[order[step]].name))
                    .str());
  // Defragmentation (moDNN): evict everything the current task does not
  // need, then try again.
  std::vector<int32_t> owners;
  for (const Arena::Segment &s : arena.segments())
    if (s.owner >= 0 && s.owner < kWorkspaceOwner &&
        !pinned[plan.residencies[s.owner].block])
      owners.push_back(s.owner);
  for (int32_t o : owners)
    evict(o);
  if (auto a = arena.allocate(bytes, owner)) {
    uses = a->second;
    return a->first;
  }
  return makeError("fragmented"); // the caller evicts pinned blocks too
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
  if (needsContent && !bs.hostValid)
    return makeErrorF("internal: {0} has no copy anywhere",
                      quoteName(tg.blocks[b].name));
  StreamUses uses{};
  auto ownerId = static_cast<int32_t>(plan.residencies.size());
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
    for (int32_t d : usesToDeps(uses))
      deps.push_back(d);
  }
  return llvm::Error::success();
}

} // namespace memfit::sched
