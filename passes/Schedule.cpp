//===- Schedule.cpp - Offload/prefetch event simulation (Algorithm 1) -----===//
#include "passes/Schedule.h"

#include "compiler/support/Diagnostics.h"
#include "compiler/support/Units.h"
#include "passes/Scheduler.h"

#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <limits>

namespace memfit {

char CutoffError::ID = 0;

void CutoffError::log(llvm::raw_ostream &os) const {
  os << "the schedule would take at least " << atLeast
     << " s per iteration, more than the cutoff";
}

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
  case Policy::ChenSqrt:
    return "chen-sqrt";
  case Policy::SuperNeurons:
    return "superneurons";
  }
  return "?";
}

bool parsePolicy(std::string_view name, Policy &out) {
  for (Policy p :
       {Policy::Ideal, Policy::VdnnAll, Policy::VdnnConv, Policy::Modnn,
        Policy::Memfit, Policy::ChenSqrt, Policy::SuperNeurons})
    if (policyName(p) == name) {
      out = p;
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

namespace sched {

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
  storage.resize(nb);
  weightSide.resize(nb);
  bytes.resize(nb);
  for (BlockId b = 0; b < (BlockId)nb; ++b) {
    storage[b] = storageOf(tg, b);
    weightSide[b] = isWeightSide(tg.blocks[b].kind);
    bytes[b] = tg.blocks[b].bytesAt(b_);
  }
  st.assign(nb, BlockState{});
  uses.assign(nb, {});
  pinned.assign(nb, 0);
  droppable = recomputableBlocks(tg);
  isConvOutput.assign(nb, false);
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    isConvOutput[b] =
        droppable[b] &&
        tg.layers[tg.tasks[tg.blocks[b].writers[0]].op].kind == OpKind::Conv;
  plan.decisions.assign(nb, BlockDecision::Keep);
  offloadCause.assign(nb, LeaveCause{});
  dropCause.assign(nb, LeaveCause{});
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
        BlockId sb = storageOfB(b);
        if (!weightSide[sb] && (uses[sb].empty() || uses[sb].back() != s))
          uses[sb].push_back(s);
      }
  }
  for (int32_t s = 0; s < n; ++s) {
    TaskId t = order[s];
    const Task &task = tg.tasks[t];
    // No plan exists when one task alone does not fit (moDNN Eq. 1); an
    // input the task overwrites in place costs nothing extra.
    int64_t need = 0;
    if (auto p = opts.inPlace ? inPlacePair(tg, task) : std::nullopt)
      if (uses[p->input].back() == s && uses[p->output].front() == s)
        need -= alignUp(bytesOf(p->input));
    std::vector<BlockId> seen;
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storageOfB(b);
        if (weightSide[sb] ||
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
    int64_t excess =
        livenessArenaNeed(tg, order, costs, opts.inPlace) - arena.size();
    // A drop set frees some of the excess already.
    for (BlockId b = 0; b < (BlockId)opts.dropAfterForward.size(); ++b)
      if (opts.dropAfterForward[b] && droppable[b])
        excess -= bytesOf(b);
    offloadTarget = excess > 0 ? excess + excess / 4 : 0;
  }
  vdnnOffloaded.assign(tg.layers.size(), false);
  vdnnPrefetched.assign(tg.layers.size(), false);
  std::vector<bool> backwardSeen(tg.layers.size(), false);

  // Every full round takes at least the compute stream's time so far plus
  // the fastest time of the tasks still to run; the last, partial round and
  // the update are counted as nothing.
  const int64_t fullRounds = opts.batch / b_;
  for (step = 0; step < n; ++step) {
    TaskId t = order[step];
    const Task &task = tg.tasks[t];
    if (opts.cutoffSeconds > 0) {
      double atLeast =
          static_cast<double>(fullRounds) *
          (streamFree[si(Stream::Compute)] + prefix[n] - prefix[step]);
      if (atLeast > opts.cutoffSeconds * (1 + 1e-9))
        return llvm::make_error<CutoffError>(atLeast);
    }
    std::vector<BlockId> touched;
    for (const auto *list : {&task.reads, &task.writes})
      for (BlockId b : *list) {
        BlockId sb = storageOfB(b);
        if (!weightSide[sb]) {
          ++pinned[sb];
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
        BlockId sb = storageOfB(b);
        if (!weightSide[sb])
          if (auto err = prepare(sb, true, deps))
            return err;
      }
      // An in-place output is placed last, once nothing else can fail and
      // send the task through defragmentation with its bytes handed over.
      for (size_t k = 0; k < task.writes.size(); ++k) {
        size_t i = task.mayRunInPlace ? (k + 1) % task.writes.size() : k;
        BlockId b = task.writes[i];
        BlockId sb = storageOfB(b);
        if (weightSide[sb])
          continue;
        if (i == 0 && runInPlace(task, deps))
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
      cause = {LeaveCause::Defragment, step, -1, -1, 0, 0};
      for (int32_t o : owners) {
        BlockId ob = plan.residencies[o].block;
        if (st[ob].hasContent)
          evict(o);
        else
          release(ob);
      }
      if (auto err2 = prepareAll()) {
        std::string m2 = llvm::toString(std::move(err2));
        if (m2 == "fragmented")
          m2 = llvm::formatv("task {0} and the blocks it must recompute "
                             "first do not fit in the {1}-byte arena",
                             quoteName(task.name), arena.size())
                   .str();
        return fail(m2);
      }
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
      cause = {LeaveCause::Workspace, step, -1, -1, ac->workspace, 0};
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
          opts.policy == Policy::VdnnAll || tg.layers[l].kind == OpKind::Conv;
      if (eligible)
        for (BlockId x : tg.layers[l].dataInputs) {
          BlockId xb = storageOfB(x);
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
            cause = {LeaveCause::Vdnn, step, -1, -1, bytesOf(xb), 0};
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

    int32_t i = emitRun(std::move(run), ac->seconds, deps);
    for (BlockId b : task.reads)
      st[storageOfB(b)].usedSinceArrival = true;
    for (BlockId b : task.writes) {
      BlockId sb = storageOfB(b);
      if (weightSide[sb])
        continue;
      BlockState &bs = st[sb];
      bs.ready = i;
      bs.hasContent = true;
      bs.hostValid = false; // any host copy is stale now
      bs.usedSinceArrival =
          tg.blocks[b].viewOf >= 0 ? bs.usedSinceArrival : false;
    }
    for (BlockId sb : touched) {
      --pinned[sb];
      while (st[sb].nextUse < uses[sb].size() &&
             uses[sb][st[sb].nextUse] <= step)
        ++st[sb].nextUse;
      indexNextUse(sb);
    }
    for (BlockId xb : vdnnRelease)
      if (st[xb].res >= 0) {
        touch(st[xb].res, Stream::Compute, i);
        release(xb);
      }
    prefetchAhead(timing[i].end);
    offloadAhead(t);
    dropForwardDone(t);
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
  for (BlockId b = 0; b < (BlockId)nb; ++b)
    if (st[b].everOffloaded && b != tg.inputBlock && b != tg.labelBlock)
      plan.decisions[b] = BlockDecision::Offload;
  explainDecisions();
  return std::move(plan);
}

void Scheduler::explainDecisions() {
  plan.decisionWhy.assign(tg.blocks.size(), std::string());
  for (BlockId b = 0; b < (BlockId)tg.blocks.size(); ++b) {
    if (plan.decisions[b] == BlockDecision::Offload) {
      plan.decisionWhy[b] = describe(offloadCause[b]);
    } else if (plan.decisions[b] == BlockDecision::Recompute) {
      std::string why = describe(dropCause[b]);
      plan.decisionWhy[b] =
          (why.empty() ? std::string("dropped") : "dropped: " + why) +
          "; recomputed by running " +
          quoteName(tg.tasks[tg.blocks[b].writers[0]].name) + " again";
    }
  }
}

std::string Scheduler::describe(const LeaveCause &c) const {
  auto task = [&](int32_t s) {
    return s >= 0 && s < (int32_t)order.size()
               ? quoteName(tg.tasks[order[s]].name)
               : std::string("?");
  };
  auto block = [&](BlockId b) {
    return b >= 0 ? quoteName(tg.blocks[b].name) : std::string("?");
  };
  switch (c.kind) {
  case LeaveCause::None:
    break;
  case LeaveCause::ArenaFull:
    return llvm::formatv("the arena was full when task {0} needed {1} for {2}",
                         task(c.step), formatBytes(c.bytes), block(c.need));
  case LeaveCause::Workspace:
    return llvm::formatv("the arena was full when task {0} needed {1} of "
                         "workspace",
                         task(c.step), formatBytes(c.bytes));
  case LeaveCause::Defragment:
    return llvm::formatv("the arena was too fragmented for task {0}: "
                         "defragmentation moved out what it did not need",
                         task(c.step));
  case LeaveCause::Prefetch:
    return llvm::formatv("made room after task {0} to prefetch {1} for task "
                         "{2}",
                         task(c.step), block(c.need), task(c.nextStep));
  case LeaveCause::Early:
    return llvm::formatv("offloaded early, after task {0}: long reuse "
                         "distance, next used by task {1} about {2:F3} ms "
                         "later",
                         task(c.step), task(c.nextStep), c.gapSeconds * 1e3);
  case LeaveCause::Vdnn:
    return llvm::formatv("{0} offloads a layer's input while the layer runs: "
                         "the input of task {1}",
                         policyName(opts.policy), task(c.step));
  case LeaveCause::DropSet:
    return llvm::formatv("in the drop set of policy {0}, it left after its "
                         "last forward use (task {1})",
                         policyName(opts.policy), task(c.step));
  case LeaveCause::Released:
    return llvm::formatv("it left after its last direct use (task {0}) and "
                         "was needed again as the input of a recompute",
                         task(c.step));
  }
  return "";
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
  return sched::Scheduler(tg, costs, round, o).run();
}

} // namespace memfit
