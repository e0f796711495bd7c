//===- Schedule.cpp - Offload/prefetch event simulation (Algorithm 1) -----===//
#include "passes/schedule/Schedule.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/schedule/GradPool.h"
#include "passes/schedule/HostOverlap.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/schedule/Scheduler.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <limits>

namespace memfit {

char CutoffError::ID = 0;
char sched::Fragmented::ID = 0;

void CutoffError::log(llvm::raw_ostream &os) const {
  os << "the schedule would take at least " << atLeast
     << " s per iteration, more than the cutoff";
}

std::string_view policyName(Policy p) { return policyDef(p).name; }

bool parsePolicy(std::string_view name, Policy &out) {
  for (const PolicyDef &def : policies())
    if (def.name == name) {
      out = def.policy;
      return true;
    }
  return false;
}

int64_t livenessArenaNeed(const TaskGraph &tg, const std::vector<TaskId> &order,
                          const CostTable &costs, bool inPlace) {
  Liveness lv = computeLiveness(tg, order, costs.subBatch, inPlace);
  int64_t maxWs = 0;
  for (TaskId t : order)
    maxWs = std::max(maxWs, costs.fastest(t).workspace);
  return lv.peakBytes - lv.weightSideBytes + maxWs;
}

int64_t arenaBytes(const TaskGraph &tg, int64_t budget) {
  return budget - tg.weightSideBytes();
}

namespace sched {

Scheduler::Scheduler(const TaskGraph &tg, const CostTable &costs,
                     const std::vector<TaskId> &order,
                     const ScheduleOptions &opts)
    : tg(tg), costs(costs), order(order), opts(opts),
      rules(rulesFor(opts.policy)), subBatch_(costs.subBatch),
      arena(rules.unbounded ? (int64_t(1) << 50) : arenaBytes(tg, opts.budget)),
      cursor(tg, costs, order),
      blocks(tg, order, subBatch_,
             /*gradientsCarry=*/opts.batch > subBatch_),
      pricer(tg, costs, rules, opts.allowRecompute, blocks, timeline, arena,
             cursor) {}

llvm::Expected<Plan> Scheduler::run() {
  plan.policy = std::string(policyName(opts.policy));
  plan.batch = opts.batch;
  plan.subBatch = subBatch_;
  plan.numSubBatches = (opts.batch + subBatch_ - 1) / subBatch_;
  plan.residentBytes = tg.weightSideBytes();
  plan.hostHomeBytes = tg.hostBytes();
  plan.nvmeHomeBytes = tg.homedBytes(Tier::Nvme);
  if (!rules.unbounded && arena.size() <= 0)
    return fail(llvm::formatv("the budget of {0} bytes does not even hold the "
                              "weights, gradients and optimizer state ({1} "
                              "bytes)",
                              opts.budget, plan.residentBytes)
                    .str());
  size_t nb = tg.blocks.size();
  plan.decisions.assign(nb, BlockDecision::Keep);
  offloadCause.assign(nb, LeaveCause{});
  walkSeen.assign(nb, 0);
  dropCause.assign(nb, LeaveCause{});
  if (auto err = checkEachTaskFits())
    return err;
  if (rules.offloadsEarly)
    offloadTarget = earlyOffloadTarget();
  layerSync.offloaded.assign(tg.layers.size(), false);
  layerSync.prefetched.assign(tg.layers.size(), false);
  layerSync.backwardSeen.assign(tg.layers.size(), false);

  // Every full round takes at least the compute stream's time so far plus
  // the fastest time of the tasks still to run; the last, partial round and
  // the update are counted as nothing.
  const int64_t fullRounds = opts.batch / subBatch_;
  const int32_t n = cursor.size();
  for (cursor.step = 0; cursor.step < n; ++cursor.step) {
    if (opts.cutoffSeconds > 0) {
      double atLeast = static_cast<double>(fullRounds) *
                       (timeline.freeAt(Stream::Compute) + cursor.prefix[n] -
                        cursor.prefix[cursor.step]);
      if (atLeast > opts.cutoffSeconds * (1 + 1e-9))
        return llvm::make_error<CutoffError>(atLeast);
    }
    if (auto err = scheduleStep())
      return err;
  }
  finishRound();
  return std::move(plan);
}

llvm::Error Scheduler::checkEachTaskFits() const {
  std::vector<BlockId> seen; // one task's storage blocks; reused
  for (int32_t s = 0; s < cursor.size(); ++s) {
    TaskId t = order[s];
    const Task &task = tg.tasks[t];
    // No plan exists when one task alone does not fit (moDNN Eq. 1); an
    // input the task overwrites in place costs nothing extra.
    int64_t need = 0;
    if (auto p = opts.inPlace ? inPlacePair(tg, task) : std::nullopt)
      if (blocks.usesOf(p->input).back() == s &&
          blocks.usesOf(p->output).front() == s)
        need -= alignUp(blocks.bytesOf(p->input));
    seen.clear();
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = blocks.storageOf(b);
        if (blocks.isResident(sb) ||
            std::find(seen.begin(), seen.end(), sb) != seen.end())
          continue;
        seen.push_back(sb);
        need += alignUp(blocks.bytesOf(sb));
      }
    need += alignUp(costs.baseline(t).workspace);
    if (!rules.unbounded && need > arena.size())
      return fail(llvm::formatv("task {0} alone needs {1} bytes of arena, "
                                "the budget leaves {2}",
                                quoteName(task.name), need, arena.size())
                      .str());
  }
  return llvm::Error::success();
}

int64_t Scheduler::earlyOffloadTarget() const {
  int64_t excess =
      livenessArenaNeed(tg, order, costs, opts.inPlace) - arena.size();
  // A drop set frees some of the excess already.
  for (BlockId b = 0; b < (BlockId)opts.dropAfterForward.size(); ++b)
    if (opts.dropAfterForward[b] && blocks.isRecomputable(b))
      excess -= blocks.bytesOf(b);
  return excess > 0 ? excess + excess / 4 : 0;
}

llvm::Error Scheduler::scheduleStep() {
  TaskId t = order[cursor.step];
  const Task &task = tg.tasks[t];
  std::vector<BlockId> touched;
  for (const auto *list : {&task.reads, &task.writes})
    for (BlockId b : *list) {
      BlockId sb = blocks.storageOf(b);
      if (!blocks.isResident(sb)) {
        blocks.pin(sb);
        touched.push_back(sb);
      }
    }
  std::vector<int32_t> syncDeps = layerSyncDeps(t);
  std::vector<int32_t> deps;
  if (auto err = prepareTask(task, deps))
    return err;
  Instr run;
  const AlgoCost &ac = placeAlgorithm(t, run, deps);
  std::vector<BlockId> layerInputs = offloadLayerInputs(task);
  deps.insert(deps.end(), syncDeps.begin(), syncDeps.end());
  int32_t i = emitRun(std::move(run), ac.seconds, deps);
  finishStep(t, i, touched, layerInputs);
  return llvm::Error::success();
}

llvm::Error Scheduler::prepareOperands(const Task &task,
                                       std::vector<int32_t> &deps) {
  deps.clear();
  for (BlockId b : task.reads) {
    BlockId sb = blocks.storageOf(b);
    if (!blocks.isResident(sb))
      if (auto err = prepare(sb, true, deps))
        return err;
  }
  // An in-place output is placed last, once nothing else can fail and
  // send the task through defragmentation with its bytes handed over.
  for (size_t k = 0; k < task.writes.size(); ++k) {
    size_t i = task.mayRunInPlace ? (k + 1) % task.writes.size() : k;
    BlockId b = task.writes[i];
    BlockId sb = blocks.storageOf(b);
    if (blocks.isResident(sb))
      continue;
    if (i == 0 && runInPlace(task, deps))
      continue;
    // Only an accumulation needs what is there; a view's bytes come with
    // the read of its base. A weight gradient homed off the device adds to
    // what it holds (the earlier writers', or the earlier sub-batches').
    bool needs = (task.accumulates[i] || blocks.isHomedOffDevice(sb)) &&
                 blocks[sb].hasContent;
    if (auto err = prepare(sb, needs, deps))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error Scheduler::prepareTask(const Task &task,
                                   std::vector<int32_t> &deps) {
  bool fragmented = false;
  llvm::Error err =
      llvm::handleErrors(prepareOperands(task, deps),
                         [&](const Fragmented &) { fragmented = true; });
  if (err || !fragmented)
    return err;
  // Defragment fully: everything leaves the arena, then the task's own
  // blocks come back into an empty one.
  std::vector<int32_t> owners;
  for (const Arena::Segment &seg : arena.segments())
    if (seg.owner >= 0 && seg.owner < kWorkspaceOwner)
      owners.push_back(seg.owner);
  cause = {.kind = LeaveCause::Defragment, .step = cursor.step};
  for (int32_t o : owners) {
    BlockId ob = blocks.blockOf(o);
    if (blocks[ob].hasContent)
      evict(o);
    else
      release(ob);
  }
  return llvm::handleErrors(
      prepareOperands(task, deps),
      [&](const Fragmented &) {
        return fail(llvm::formatv("task {0} and the blocks it must recompute "
                                  "first do not fit in the {1}-byte arena",
                                  quoteName(task.name), arena.size()));
      },
      // The message as plans have always reported it (a broken invariant,
      // an InternalError, passes through).
      [&](const UserError &e) { return fail(e.message()); });
}

const AlgoCost &Scheduler::placeAlgorithm(TaskId t, Instr &run,
                                          std::vector<int32_t> &deps) {
  std::optional<Arena::Window> room;
  int32_t algo = chooseAlgo(t, room);
  const AlgoCost *ac = costs.find(t, algo);
  assert(ac && "chosen algorithm not in the cost table");
  run.kind = InstrKind::Run;
  run.stream = Stream::Compute;
  run.task = t;
  run.algo = algo;
  if (ac->workspace > 0) {
    StreamUses wsUses{};
    cause = {.kind = LeaveCause::Workspace,
             .step = cursor.step,
             .bytes = ac->workspace};
    auto off =
        allocate(ac->workspace, kWorkspaceOwner, wsUses, std::move(room));
    if (!off) {
      llvm::consumeError(off.takeError());
      // Fall back to the zero-workspace algorithm.
      ac = &costs.baseline(t);
      run.algo = ac->algo;
    } else {
      run.workspaceOffset = *off;
      run.workspaceBytes = ac->workspace;
      addUseDeps(wsUses, deps);
    }
  }
  return *ac;
}

std::vector<int32_t> Scheduler::layerSyncDeps(TaskId t) {
  std::vector<int32_t> deps;
  if (rules.layerOffload == PolicyRules::LayerOffload::None)
    return deps;
  const Task &task = tg.tasks[t];
  deps.swap(layerSync.nextTask);
  if (task.op >= 0 && task.kind != TaskKind::Forward &&
      !layerSync.backwardSeen[task.op]) {
    // Per-layer synchronisation: this layer waits for the prefetch issued
    // when the previous one started, then issues its own.
    layerSync.backwardSeen[task.op] = true;
    deps.insert(deps.end(), layerSync.nextLayer.begin(),
                layerSync.nextLayer.end());
    layerSync.nextLayer.clear();
    vdnnPrefetch(t);
  }
  return deps;
}

std::vector<BlockId> Scheduler::offloadLayerInputs(const Task &task) {
  // vDNN offloads a layer's input while the layer runs, and the next layer
  // waits for the copy.
  std::vector<BlockId> inputs;
  if (task.kind != TaskKind::Forward)
    return inputs;
  OpId l = task.op;
  bool eligible =
      rules.layerOffload == PolicyRules::LayerOffload::AllLayers ||
      (rules.layerOffload == PolicyRules::LayerOffload::ConvLayers &&
       isConvolution(tg.layers[l].kind));
  if (!eligible)
    return inputs;
  for (BlockId x : tg.layers[l].dataInputs) {
    BlockId xb = blocks.storageOf(x);
    int32_t later = -1;
    std::span<const int32_t> uses = blocks.usesOf(xb);
    for (size_t k = blocks[xb].nextUse; k < uses.size(); ++k)
      if (uses[k] > cursor.step) {
        later = uses[k];
        break;
      }
    if (later < cursor.firstBackward)
      continue; // not this input's last forward consumer
    layerSync.offloaded[l] = true;
    inputs.push_back(xb);
    if (!blocks[xb].hostValid) {
      cause = {.kind = LeaveCause::Vdnn,
               .step = cursor.step,
               .bytes = blocks.bytesOf(xb)};
      layerSync.nextTask.push_back(copyOut(blocks[xb].res));
    }
  }
  return inputs;
}

void Scheduler::finishStep(TaskId t, int32_t i,
                           const std::vector<BlockId> &touched,
                           const std::vector<BlockId> &layerInputs) {
  const Task &task = tg.tasks[t];
  for (BlockId b : task.reads)
    blocks[blocks.storageOf(b)].usedSinceArrival = true;
  for (BlockId b : task.writes) {
    BlockId sb = blocks.storageOf(b);
    if (blocks.isResident(sb))
      continue;
    BlockState &bs = blocks[sb];
    bs.ready = i;
    bs.hasContent = true;
    bs.hostValid = false; // any host copy is stale now
    bs.usedSinceArrival =
        tg.blocks[b].viewOf >= 0 ? bs.usedSinceArrival : false;
  }
  for (BlockId sb : touched) {
    blocks.unpin(sb);
    blocks.usedUpTo(sb, cursor.step);
    pricer.indexNextUse(sb);
  }
  for (BlockId xb : layerInputs)
    if (blocks[xb].res >= 0) {
      touch(blocks[xb].res, Stream::Compute, i);
      release(xb);
    }
  if (rules.prefetchesAhead)
    prefetchAhead(timeline.endOf(i));
  if (rules.offloadsEarly)
    offloadAhead(t);
  offloadForced(t);
  dropForwardDone(t);
  leaveAfterStep(touched);
  for (BlockId sb : touched)
    if (blocks.nextUseStep(sb) < 0) {
      // A gradient homed off the device goes home once final in this round.
      if (blocks.isHomedOffDevice(sb) && !blocks[sb].hostValid)
        copyOut(blocks[sb].res);
      release(sb); // dead: its last reader ran
    }
}

void Scheduler::finishRound() {
  // Join the streams so the next round starts after everything in this one.
  timeline.join();
  plan.round = timeline.round();
  plan.residencies = blocks.take();
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
    run.onHost = tg.runsOnHost(task);
    plan.update.push_back(std::move(run));
  }
  plan.numEvents = timeline.numEvents();
  plan.arenaBytes = arena.highWater();
  plan.budget = rules.unbounded ? plan.totalBytes() : opts.budget;
  plan.summary.peakArenaBytes = arena.highWater();
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b)
    if (blocks[b].everOffloaded && !isBatchData(tg.blocks[b].kind))
      plan.decisions[b] = BlockDecision::Offload;
  explainDecisions();
}

} // namespace sched

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
  auto plan = sched::Scheduler(tg, costs, round, o).run();
  if (!plan)
    return plan;
  overlapHostUpdates(tg, *plan);
  if (tg.gradPoolBytes > 0) {
    // The pool holds a gradient only between its copy home and its update:
    // an earlier sub-batch's sum would have to stay somewhere.
    if (plan->numSubBatches > 1)
      return makeInfeasibleF(
          "homed gradients that stream through a {0} host pool need the "
          "batch in one round, not {1} sub-batches",
          formatBytes(tg.gradPoolBytes), plan->numSubBatches);
    poolGradients(tg, *plan);
  }
  return plan;
}

} // namespace memfit
