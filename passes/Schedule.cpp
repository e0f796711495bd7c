//===- Schedule.cpp - Offload/prefetch event simulation (Algorithm 1) -----===//
#include "passes/Schedule.h"

#include "compiler/Diagnostics.h"
#include "compiler/Units.h"
#include "passes/Arena.h"
#include "passes/Liveness.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <limits>

namespace memfit {

std::string_view policyName(Policy p) {
  switch (p) {
  case Policy::Ideal:
    return "ideal";
  case Policy::VdnnAll:
    return "vdnn-all";
  case Policy::VdnnConv:
    return "vdnn-conv";
  case Policy::Modnn:
    return "modnn";
  case Policy::Memfit:
    return "memfit";
  }
  return "?";
}

bool parsePolicy(std::string_view name, Policy &out) {
  for (Policy p : {Policy::Ideal, Policy::VdnnAll, Policy::VdnnConv,
                   Policy::Modnn, Policy::Memfit})
    if (policyName(p) == name) {
      out = p;
      return true;
    }
  return false;
}

namespace {

using Clock = std::array<int32_t, kNumStreams>;
constexpr int32_t kWorkspaceOwner = 1 << 30;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kLookahead = 256; // prefetch look-ahead, in tasks

int si(Stream s) { return static_cast<int>(s); }

struct Timing {
  double start = 0, end = 0;
  Clock after{}; // what the stream has done once this instruction finished
  EventId recordAfter = -1;
};

struct BlockState {
  ResidencyId res = -1;
  bool hasContent = false;
  bool hostValid = false;
  bool usedSinceArrival = true;
  int32_t hostCopy = -1; // the copy-out that made the host copy
  int32_t ready = -1;    // the instruction that put the content in `res`
  size_t nextUse = 0;    // index into uses[block]
  bool everOffloaded = false;
};

/// Why a block was first copied to the host. Recorded as plain data and put
/// into words once the plan is done (Plan::decisionWhy), so planning pays
/// nothing for the report.
struct OffloadCause {
  enum Kind : uint8_t {
    None,
    ArenaFull,  // no room for a block the current task needs
    Workspace,  // no room for the current task's workspace
    Defragment, // moDNN's defragmentation: everything unpinned leaves
    Prefetch,   // room made for a prefetch ahead of a later task
    Early,      // memfit's early offload of a block with a long reuse distance
    Vdnn,       // vDNN's fixed rule: a layer's input during its forward
  } kind = None;
  int32_t step = -1;     // the task being scheduled (index into the order)
  BlockId need = -1;     // ArenaFull, Prefetch: the block that needed room
  int32_t nextStep = -1; // Early: the next use; Prefetch: the task served
  int64_t bytes = 0;     // the bytes that needed room
  double gapSeconds = 0; // Early: estimated time until the next use
};

class Scheduler {
public:
  Scheduler(const TaskGraph &tg, const CostTable &costs,
            const std::vector<TaskId> &order, const ScheduleOptions &opts)
      : tg(tg), costs(costs), order(order), opts(opts),
        arena(opts.policy == Policy::Ideal
                  ? (int64_t(1) << 50)
                  : opts.budget - tg.weightSideBytes()) {}

  llvm::Expected<Plan> run();

private:
  // --- emission ---
  int32_t emit(Instr in, double duration, const std::vector<int32_t> &deps);
  void waitFor(Stream s, int32_t dep, double &earliest);
  std::vector<int32_t> usesToDeps(const StreamUses &u) const;

  // --- memory ---
  int64_t bytesOf(BlockId b) const { return tg.blocks[b].bytesAt(b_); }
  ResidencyId newResidency(BlockId b, int64_t offset);
  llvm::Expected<int64_t> allocate(int64_t bytes, int32_t owner,
                                   StreamUses &uses);
  bool evictable(int32_t owner) const;
  double evictionPrice(const Arena::Window &w) const;
  void evict(ResidencyId r);
  void noteOffload(BlockId b) {
    if (!st[b].everOffloaded)
      firstCause[b] = cause;
  }
  std::string describe(const OffloadCause &c) const;
  void release(BlockId b);
  void touch(ResidencyId r, Stream s, int32_t instr);
  llvm::Error prepare(BlockId b, bool needsContent, std::vector<int32_t> &deps);
  int32_t copyIn(BlockId b, ResidencyId r, const StreamUses &uses);

  // --- decisions ---
  int32_t chooseAlgo(TaskId t);
  void prefetchAhead(double taskEnd);
  void offloadAhead(TaskId t);
  void vdnnPrefetch(TaskId t);
  bool isVdnn() const {
    return opts.policy == Policy::VdnnAll || opts.policy == Policy::VdnnConv;
  }
  double est(int32_t s, double now) const {
    return now + prefix[s] - prefix[step + 1];
  }
  int32_t nextUseStep(BlockId b) const {
    const BlockState &bs = st[b];
    return bs.nextUse < uses[b].size() ? uses[b][bs.nextUse] : -1;
  }

  llvm::Error fail(const llvm::Twine &why) const {
    return makeErrorF("policy {0} cannot meet the budget at sub-batch {1}: {2}",
                      policyName(opts.policy), b_, why.str());
  }

  const TaskGraph &tg;
  const CostTable &costs;
  const std::vector<TaskId> &order;
  ScheduleOptions opts;
  int64_t b_ = 1;
  Plan plan;
  Arena arena;
  std::vector<Instr> instrs;
  std::vector<Timing> timing;
  std::array<double, kNumStreams> streamFree{};
  std::array<Clock, kNumStreams> clk{};
  std::array<int32_t, kNumStreams> lastOn{-1, -1, -1};
  EventId numEvents = 0;

  std::vector<BlockState> st;
  std::vector<std::vector<int32_t>> uses; // per storage block: steps
  std::vector<StreamUses> pending;        // per residency: bytes' prior uses
  std::vector<bool> pinned;               // blocks the current task needs
  std::vector<double> prefix;             // fastest compute time before step
  int32_t step = 0;
  int32_t firstBackward = 0;
  int64_t offloadTarget = 0, offloadedAhead = 0;
  // vDNN's synchronisation: copies the next task waits for, and prefetches
  // the next layer's backward waits for.
  std::vector<int32_t> syncNext, syncLayer;
  std::vector<bool> vdnnOffloaded, vdnnPrefetched; // per op
  // The reason for the evictions the scheduler is making now, and per block
  // the reason of its first offload.
  OffloadCause cause;
  std::vector<OffloadCause> firstCause;
};

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
  cause.kind = OffloadCause::Defragment;
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
  cause = {OffloadCause::ArenaFull, step, b, -1, bytesOf(b), 0};
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
      BlockId sb = storageOf(tg, b);
      if (!isWeightSide(tg.blocks[sb].kind) && st[sb].res < 0 &&
          st[sb].hasContent)
        nextPrefetch += bytesOf(sb);
    }
  const AlgoCost &base = costs.baseline(t);
  int32_t best = base.algo;
  double bestGain = 0;
  auto ev = [this](int32_t o) { return evictable(o); };
  auto price = [this](const Arena::Window &w) { return evictionPrice(w); };
  for (const AlgoCost &a : algos) {
    if (a.baseline)
      continue;
    double toff = 0;
    if (a.workspace > 0 && alignUp(a.workspace) > freeNow) {
      auto w = arena.findEviction(a.workspace, ev, price);
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
      BlockId sb = storageOf(tg, b);
      if (isWeightSide(tg.blocks[sb].kind) || st[sb].res >= 0 ||
          !st[sb].hasContent)
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
      auto ev = [&](int32_t o) {
        if (!evictable(o))
          return false;
        BlockId ob = plan.residencies[o].block;
        int32_t next = nextUseStep(ob);
        return st[ob].hostValid && (next < 0 || next > s);
      };
      auto price = [this](const Arena::Window &w) { return evictionPrice(w); };
      StreamUses uses{};
      auto ownerId = static_cast<int32_t>(plan.residencies.size());
      std::optional<int64_t> off;
      if (auto a = arena.allocate(bytesOf(b), ownerId)) {
        off = a->first;
        uses = a->second;
      } else if (auto w = arena.findEviction(bytesOf(b), ev, price)) {
        cause = {OffloadCause::Prefetch, step, b, s, bytesOf(b), 0};
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
    cands.push_back(storageOf(tg, b));
  for (BlockId b : task.writes)
    cands.push_back(storageOf(tg, b));
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
    cause = {OffloadCause::Early, step, -1, next, bytesOf(b), gap};
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
  const Graph &g = *tg.graph;
  for (OpId id = l - 1; id >= 0; --id) {
    if (vdnnOffloaded[id] && !vdnnPrefetched[id]) {
      vdnnPrefetched[id] = true;
      for (ValueId x : g.dataInputs(id)) {
        BlockId b = storageOf(tg, tg.valueBlock[x]);
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
    if (g.ops[id].kind == OpKind::Conv)
      return;
  }
}

llvm::Expected<Plan> Scheduler::run() {
  b_ = costs.subBatch;
  plan.policy = std::string(policyName(opts.policy));
  plan.batch = opts.batch;
  plan.subBatch = b_;
  plan.numSubBatches = (opts.batch + b_ - 1) / b_;
  plan.residentBytes = tg.weightSideBytes();
  if (opts.policy != Policy::Ideal && arena.size() <= 0)
    return fail(llvm::formatv("the budget of {0} bytes does not even hold the "
                              "weights, gradients and optimizer state ({1} "
                              "bytes)",
                              opts.budget, plan.residentBytes)
                    .str());
  size_t nb = tg.blocks.size();
  auto n = static_cast<int32_t>(order.size());
  st.assign(nb, BlockState{});
  uses.assign(nb, {});
  pinned.assign(nb, false);
  plan.decisions.assign(nb, BlockDecision::Keep);
  firstCause.assign(nb, OffloadCause{});
  for (BlockId b : {tg.inputBlock, tg.labelBlock}) {
    st[b].hasContent = true;
    st[b].hostValid = true;
  }
  prefix.assign(n + 1, 0);
  firstBackward = n;
  for (int32_t s = 0; s < n; ++s) {
    TaskId t = order[s];
    const Task &task = tg.tasks[t];
    prefix[s + 1] = prefix[s] + costs.fastest(t).seconds;
    if (task.kind != TaskKind::Forward && firstBackward == n)
      firstBackward = s;
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storageOf(tg, b);
        if (!isWeightSide(tg.blocks[sb].kind) &&
            (uses[sb].empty() || uses[sb].back() != s))
          uses[sb].push_back(s);
      }
    // No plan exists when one task alone does not fit (moDNN Eq. 1).
    int64_t need = 0;
    std::vector<BlockId> seen;
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storageOf(tg, b);
        if (isWeightSide(tg.blocks[sb].kind) ||
            std::find(seen.begin(), seen.end(), sb) != seen.end())
          continue;
        seen.push_back(sb);
        need += alignUp(bytesOf(sb));
      }
    need += alignUp(costs.baseline(t).workspace);
    if (opts.policy != Policy::Ideal && need > arena.size())
      return fail(llvm::formatv("task {0} alone needs {1} bytes of arena, "
                                "the budget leaves {2}",
                                quoteName(task.name), need, arena.size())
                      .str());
  }
  if (opts.policy == Policy::Memfit) {
    Liveness lv = computeLiveness(tg, order, b_);
    int64_t maxWs = 0;
    for (TaskId t : order)
      maxWs = std::max(maxWs, costs.fastest(t).workspace);
    int64_t excess = lv.peakBytes - lv.weightSideBytes + maxWs - arena.size();
    offloadTarget = excess > 0 ? excess + excess / 4 : 0;
  }
  const Graph &g = *tg.graph;
  vdnnOffloaded.assign(g.ops.size(), false);
  vdnnPrefetched.assign(g.ops.size(), false);
  std::vector<bool> backwardSeen(g.ops.size(), false);

  for (step = 0; step < n; ++step) {
    TaskId t = order[step];
    const Task &task = tg.tasks[t];
    std::vector<BlockId> touched;
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storageOf(tg, b);
        if (!isWeightSide(tg.blocks[sb].kind)) {
          pinned[sb] = true;
          touched.push_back(sb);
        }
      }
    std::vector<int32_t> vdnnDeps;
    if (isVdnn()) {
      vdnnDeps.swap(syncNext);
      if (task.op >= 0 && task.kind != TaskKind::Forward &&
          !backwardSeen[task.op]) {
        // Per-layer synchronisation: this layer waits for the prefetch
        // issued when the previous one started, then issues its own.
        backwardSeen[task.op] = true;
        vdnnDeps.insert(vdnnDeps.end(), syncLayer.begin(), syncLayer.end());
        syncLayer.clear();
        vdnnPrefetch(t);
      }
    }
    std::vector<int32_t> deps;
    auto prepareAll = [&]() -> llvm::Error {
      deps.clear();
      for (BlockId b : task.reads) {
        BlockId sb = storageOf(tg, b);
        if (!isWeightSide(tg.blocks[sb].kind))
          if (auto err = prepare(sb, true, deps))
            return err;
      }
      for (size_t i = 0; i < task.writes.size(); ++i) {
        BlockId b = task.writes[i];
        BlockId sb = storageOf(tg, b);
        if (isWeightSide(tg.blocks[sb].kind))
          continue;
        // Only an accumulation needs what is there; a view's bytes come with
        // the read of its base.
        bool needs = task.accumulates[i] && st[sb].hasContent;
        if (auto err = prepare(sb, needs, deps))
          return err;
      }
      return llvm::Error::success();
    };
    if (auto err = prepareAll()) {
      std::string msg = llvm::toString(std::move(err));
      if (msg != "fragmented")
        return makeError(msg);
      // Defragment fully: everything leaves the arena, then the task's own
      // blocks come back into an empty one.
      std::vector<int32_t> owners;
      for (const Arena::Segment &seg : arena.segments())
        if (seg.owner >= 0 && seg.owner < kWorkspaceOwner)
          owners.push_back(seg.owner);
      cause = {OffloadCause::Defragment, step, -1, -1, 0, 0};
      for (int32_t o : owners) {
        BlockId ob = plan.residencies[o].block;
        if (st[ob].hasContent)
          evict(o);
        else
          release(ob);
      }
      if (auto err2 = prepareAll())
        return fail(llvm::toString(std::move(err2)));
    }

    int32_t algo = chooseAlgo(t);
    const AlgoCost *ac = costs.find(t, algo);
    assert(ac && "chosen algorithm not in the cost table");
    Instr run;
    run.kind = InstrKind::Run;
    run.stream = Stream::Compute;
    run.task = t;
    run.algo = algo;
    if (ac->workspace > 0) {
      StreamUses wsUses{};
      cause = {OffloadCause::Workspace, step, -1, -1, ac->workspace, 0};
      auto off = allocate(ac->workspace, kWorkspaceOwner, wsUses);
      if (!off) {
        llvm::consumeError(off.takeError());
        // Fall back to the zero-workspace algorithm.
        ac = &costs.baseline(t);
        run.algo = ac->algo;
      } else {
        run.workspaceOffset = *off;
        run.workspaceBytes = ac->workspace;
        for (int32_t d : usesToDeps(wsUses))
          deps.push_back(d);
      }
    }
    // vDNN offloads a layer's input while the layer runs, and the next layer
    // waits for the copy.
    std::vector<BlockId> vdnnRelease;
    if (isVdnn() && task.kind == TaskKind::Forward) {
      OpId l = task.op;
      bool eligible =
          opts.policy == Policy::VdnnAll || g.ops[l].kind == OpKind::Conv;
      if (eligible)
        for (ValueId x : g.dataInputs(l)) {
          BlockId xb = storageOf(tg, tg.valueBlock[x]);
          int32_t later = -1;
          for (size_t k = st[xb].nextUse; k < uses[xb].size(); ++k)
            if (uses[xb][k] > step) {
              later = uses[xb][k];
              break;
            }
          if (later < firstBackward)
            continue; // not this input's last forward consumer
          vdnnOffloaded[l] = true;
          vdnnRelease.push_back(xb);
          if (!st[xb].hostValid) {
            Instr co;
            co.kind = InstrKind::CopyOut;
            co.stream = Stream::CopyOut;
            co.residency = st[xb].res;
            int32_t c =
                emit(co, costs.copyOutSeconds(bytesOf(xb)), {st[xb].ready});
            touch(st[xb].res, Stream::CopyOut, c);
            cause = {OffloadCause::Vdnn, step, -1, -1, bytesOf(xb), 0};
            noteOffload(xb);
            st[xb].hostValid = true;
            st[xb].hostCopy = c;
            st[xb].everOffloaded = true;
            plan.summary.bytesToHost += bytesOf(xb);
            syncNext.push_back(c);
          }
        }
    }
    deps.insert(deps.end(), vdnnDeps.begin(), vdnnDeps.end());

    for (BlockId b : task.reads) {
      BlockId sb = storageOf(tg, b);
      run.operands.push_back(isWeightSide(tg.blocks[sb].kind) ? -1
                                                              : st[sb].res);
    }
    for (BlockId b : task.writes) {
      BlockId sb = storageOf(tg, b);
      run.operands.push_back(isWeightSide(tg.blocks[sb].kind) ? -1
                                                              : st[sb].res);
    }
    std::vector<ResidencyId> ops = run.operands;
    int64_t wsBytes = run.workspaceBytes;
    int32_t i = emit(std::move(run), ac->seconds, deps);
    for (ResidencyId r : ops)
      if (r >= 0) {
        touch(r, Stream::Compute, i);
        pending[r] = {};
      }
    if (wsBytes > 0) {
      arena.touch(kWorkspaceOwner, Stream::Compute, {i + 1, timing[i].end});
      arena.release(kWorkspaceOwner, {});
    }
    for (BlockId b : task.reads)
      st[storageOf(tg, b)].usedSinceArrival = true;
    for (BlockId b : task.writes) {
      BlockId sb = storageOf(tg, b);
      if (isWeightSide(tg.blocks[sb].kind))
        continue;
      BlockState &bs = st[sb];
      bs.ready = i;
      bs.hasContent = true;
      bs.hostValid = false; // any host copy is stale now
      bs.usedSinceArrival =
          tg.blocks[b].viewOf >= 0 ? bs.usedSinceArrival : false;
    }
    for (BlockId sb : touched) {
      pinned[sb] = false;
      while (st[sb].nextUse < uses[sb].size() &&
             uses[sb][st[sb].nextUse] <= step)
        ++st[sb].nextUse;
    }
    for (BlockId xb : vdnnRelease)
      if (st[xb].res >= 0) {
        touch(st[xb].res, Stream::Compute, i);
        release(xb);
      }
    prefetchAhead(timing[i].end);
    offloadAhead(t);
    for (BlockId sb : touched)
      if (st[sb].nextUse >= uses[sb].size())
        release(sb); // dead: its last reader ran
  }

  // Join the streams so the next round starts after everything in this one.
  double dummy = 0;
  for (Stream s : {Stream::CopyOut, Stream::CopyIn})
    waitFor(Stream::Compute, lastOn[si(s)], dummy);
  for (Stream s : {Stream::CopyOut, Stream::CopyIn})
    waitFor(s, lastOn[si(Stream::Compute)], dummy);

  for (size_t k = 0; k < instrs.size(); ++k) {
    plan.round.push_back(instrs[k]);
    if (timing[k].recordAfter >= 0) {
      Instr rec;
      rec.kind = InstrKind::Record;
      rec.stream = instrs[k].stream;
      rec.event = timing[k].recordAfter;
      plan.round.push_back(rec);
    }
  }
  for (TaskId t = 0; t < (TaskId)tg.tasks.size(); ++t) {
    const Task &task = tg.tasks[t];
    if (task.kind != TaskKind::Update)
      continue;
    Instr run;
    run.kind = InstrKind::Run;
    run.stream = Stream::Compute;
    run.task = t;
    run.algo = costs.fastest(t).algo;
    run.operands.assign(task.reads.size() + task.writes.size(), -1);
    plan.update.push_back(std::move(run));
  }
  plan.numEvents = numEvents;
  plan.arenaBytes = arena.highWater();
  plan.budget = opts.policy == Policy::Ideal ? plan.totalBytes() : opts.budget;
  plan.summary.peakArenaBytes = arena.highWater();
  plan.decisionWhy.assign(nb, std::string());
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    if (st[b].everOffloaded && b != tg.inputBlock && b != tg.labelBlock) {
      plan.decisions[b] = BlockDecision::Offload;
      plan.decisionWhy[b] = describe(firstCause[b]);
    }
  return std::move(plan);
}

std::string Scheduler::describe(const OffloadCause &c) const {
  auto task = [&](int32_t s) {
    return s >= 0 && s < (int32_t)order.size()
               ? quoteName(tg.tasks[order[s]].name)
               : std::string("?");
  };
  auto block = [&](BlockId b) {
    return b >= 0 ? quoteName(tg.blocks[b].name) : std::string("?");
  };
  switch (c.kind) {
  case OffloadCause::None:
    break;
  case OffloadCause::ArenaFull:
    return llvm::formatv("the arena was full when task {0} needed {1} for {2}",
                         task(c.step), formatBytes(c.bytes), block(c.need));
  case OffloadCause::Workspace:
    return llvm::formatv("the arena was full when task {0} needed {1} of "
                         "workspace",
                         task(c.step), formatBytes(c.bytes));
  case OffloadCause::Defragment:
    return llvm::formatv("the arena was too fragmented for task {0}: "
                         "defragmentation offloaded what it did not need",
                         task(c.step));
  case OffloadCause::Prefetch:
    return llvm::formatv("made room after task {0} to prefetch {1} for task "
                         "{2}",
                         task(c.step), block(c.need), task(c.nextStep));
  case OffloadCause::Early:
    return llvm::formatv("offloaded early, after task {0}: long reuse "
                         "distance, next used by task {1} about {2:F3} ms "
                         "later",
                         task(c.step), task(c.nextStep), c.gapSeconds * 1e3);
  case OffloadCause::Vdnn:
    return llvm::formatv("{0}: the input of the layer of task {1}, offloaded "
                         "while it ran",
                         policyName(opts.policy), task(c.step));
  }
  return "offloaded";
}

} // namespace

llvm::Expected<Plan> schedule(const TaskGraph &tg, const CostTable &costs,
                              const std::vector<TaskId> &order,
                              const ScheduleOptions &opts) {
  assert(costs.tasks.size() == tg.tasks.size() && "cost table mismatch");
  std::vector<TaskId> round;
  for (TaskId t : order)
    if (tg.tasks[t].kind != TaskKind::Update)
      round.push_back(t);
  ScheduleOptions o = opts;
  if (o.batch <= 0)
    o.batch = costs.subBatch;
  return Scheduler(tg, costs, round, o).run();
}

} // namespace memfit
