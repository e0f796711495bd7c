//===- PipelineOthers.cpp - The choices the first phase left unpolished ---===//
//
// The first phase ranks sub-batches by their unpolished schedules and the
// later phases polish its winner alone; these phases search and polish the
// other sub-batches and the other task order too, each unless a proven
// time bound (passes/solve/TimeBound.h) says no plan there can beat the
// best, and give the bound over every sub-batch. Guarantees: a choice is
// skipped only on a proof, and the best plan is replaced only by a
// strictly faster one. Not for graphs with weights homed off the GPU: the
// tier search (Tiers.h) checks each plan's host slots against
// --host-budget after the search, and a faster plan that offloads more
// could push a homing that fits over it.
//
//===----------------------------------------------------------------------===//
#include "passes/analysis/MemoryLowerBound.h"
#include "passes/analysis/Order.h"
#include "passes/search/PipelineSteps.h"
#include "passes/search/SubBatch.h"

#include <limits>

namespace memfit::pipeline {
namespace {

/// The bound of every plan with `plan`'s order, budget and updates at
/// sub-batch `sb`.
std::optional<IterationBound> boundAt(const SearchState &s, const Plan &plan,
                                      int64_t sb) {
  Tables tb = tablesFor(s.tableAt, s.r.batch, sb);
  Plan probe = plan;
  probe.subBatch = sb;
  probe.numSubBatches = (s.r.batch + sb - 1) / sb;
  return iterationBound(s.tg, probe, *tb.full, tb.last, {});
}

/// `sub` made a search of the same request, budget and ideal as `s`,
/// before the caller narrows it.
void fork(const SearchState &s, SearchState &sub) {
  sub.r = s.r;
  sub.policy = s.policy;
  sub.coupled = s.coupled;
  sub.chunking = s.chunking;
  sub.forceChunks = s.forceChunks;
  sub.order = s.order;
  sub.roundTasks = s.roundTasks;
  sub.lowerBound = s.lowerBound;
  sub.idealSeconds = s.idealSeconds;
  sub.idealPeakBytes = s.idealPeakBytes;
  sub.budget = s.budget;
  sub.eq3SubBatch = s.eq3SubBatch;
}

} // namespace

/// The other sub-batches. The first phase ranks sub-batches by their
/// unpolished schedules and the later phases polish the winner alone, so a
/// sub-batch whose polished plan would have won could lose there
/// (tools/bench/forced.py: SqueezeNet b64 at 50% on the H100 model, 20.27
/// ms at 2 x 32 where the whole batch polishes to 19.40). Each other
/// sub-batch is searched and polished on its own, as if forced, unless its
/// proven bound (this order, this sub-batch) is no faster than the best
/// plan: then no plan there can win. Kept when strictly faster.
llvm::Expected<bool> otherSubBatches(SearchState &s) {
  if (!s.best || !s.policy->phases.polish || s.req.forcedSubBatch != 0 ||
      s.tg.tasks.size() > kBoundGuided || !s.tg.homes.empty())
    return false;
  for (int64_t sb : subBatchCandidates(s.eq3SubBatch, s.req.batch)) {
    if (sb == s.best->plan.subBatch)
      continue;
    // Below its memory floor no plan exists at this sub-batch (infinity).
    const std::optional<double> bound = subBatchBound(s, s.best->plan, sb);
    s.record.subBatchBounds[sb] = bound;
    if (bound && *bound >= s.best->sim.iterationSeconds)
      continue;
    SearchState sub(s.tg, s.tableAt, s.req);
    fork(s, sub);
    sub.req.forcedSubBatch = sub.r.forcedSubBatch = sb;
    for (Phase phase : {wholeRounds, optimalInSearch, guideAndRefine})
      if (auto ran = phase(sub); !ran)
        return ran.takeError();
    s.record.abandoned += sub.record.abandoned;
    s.record.refineTries += sub.record.refineTries;
    if (sub.best &&
        sub.best->sim.iterationSeconds < s.best->sim.iterationSeconds) {
      s.record.refineChanged += sub.record.refineChanged;
      s.best = std::move(sub.best);
      s.lost = std::move(sub.lost);
    }
  }
  return true;
}

/// The other task order (join-aware or the model's), unless --order named
/// one: where the proven bound of the best plan's sub-batch in that order
/// is below the best plan (or the batch may go in chunks, which that bound
/// does not cover), the search runs again in it (its whole rounds, polish,
/// other sub-batches and chunks) and is kept when faster. GoogLeNet b64 at
/// 50% on the H100 model plans 0.7% faster in the model's order.
llvm::Expected<bool> otherOrder(SearchState &s) {
  // Without a whole-round plan the batch may still go in chunks, in
  // either order (RegNet-X 800MF b64 at 25%: 2.4% faster in the model's
  // order, where no whole round fits).
  if ((!s.best && !s.chunking) || !s.policy->phases.polish ||
      s.req.forcedOrder || s.tg.tasks.size() > kBoundGuided ||
      !s.tg.homes.empty())
    return false;
  const OrderKind kind = s.req.order == OrderKind::JoinAware
                             ? OrderKind::Built
                             : OrderKind::JoinAware;
  std::vector<TaskId> order = taskOrder(s.tg, kind);
  if (order == s.order)
    return false;
  // No whole round plans: the chunks in this order first, so that the
  // other order's must beat them.
  if (!s.best)
    if (auto ran = chunks(s); !ran)
      return ran.takeError();
  // The bound is of whole rounds: where the batch may go in chunks (which
  // can beat every whole round: RegNet-X 400MF b64 at 25% plans 2.8%
  // faster in chunks in the model's order), it rules nothing out.
  if (!s.chunking) {
    Plan probe = s.best->plan;
    probe.round.clear();
    for (TaskId t : order)
      if (s.tg.tasks[t].kind != TaskKind::Update) {
        Instr run;
        run.kind = InstrKind::Run;
        run.task = t;
        probe.round.push_back(run);
      }
    Tables tb = tablesFor(s.tableAt, s.r.batch, probe.subBatch);
    auto bound = iterationBound(s.tg, probe, *tb.full, tb.last, {});
    if (bound && bound->seconds >= s.best->sim.iterationSeconds)
      return true;
  }
  SearchState sub(s.tg, s.tableAt, s.req);
  fork(s, sub);
  sub.req.order = sub.r.order = kind;
  sub.req.forcedOrder = true;
  sub.order = std::move(order);
  for (Phase phase :
       {wholeRounds, optimalInSearch, guideAndRefine, otherSubBatches, chunks})
    if (auto ran = phase(sub); !ran)
      return ran.takeError();
  s.record.abandoned += sub.record.abandoned;
  s.record.refineTries += sub.record.refineTries;
  if (sub.best && (!s.best || sub.best->sim.iterationSeconds <
                                  s.best->sim.iterationSeconds)) {
    s.record.refineChanged += sub.record.refineChanged;
    s.record.subBatchBounds = std::move(sub.record.subBatchBounds);
    s.best = std::move(sub.best);
    s.lost = std::move(sub.lost);
    s.order = std::move(sub.order);
    s.req.order = s.r.order = kind;
    s.chunked = std::move(sub.chunked);
    s.chunksSearched = sub.chunksSearched;
    s.record.chunksTried = std::move(sub.record.chunksTried);
    s.record.chunksPruned = std::move(sub.record.chunksPruned);
  }
  return true;
}

std::optional<double> subBatchBound(const SearchState &s, const Plan &plan,
                                    int64_t sb) {
  if (auto it = s.record.subBatchBounds.find(sb);
      it != s.record.subBatchBounds.end())
    return it->second;
  if (computeLowerBound(s.tg, sb).bytes > s.r.budget)
    return std::numeric_limits<double>::infinity();
  if (auto b = boundAt(s, plan, sb))
    return b->seconds;
  return std::nullopt;
}

/// The least bound over every sub-batch the search allows, in its order, or
/// 0 where some sub-batch has none (or the search did not look at them all:
/// otherSubBatches did not run, or the plan is in chunks). `plan` is the
/// outcome's, `own` its bound.
double spaceBound(const SearchState &s, const Plan &plan, double own) {
  if (s.record.subBatchBounds.empty() || plan.chunks > 1)
    return 0;
  double least = own;
  for (int64_t sb : subBatchCandidates(s.eq3SubBatch, s.req.batch)) {
    if (sb == plan.subBatch)
      continue;
    // Recorded by otherSubBatches, or the first phase's winner, which that
    // phase skipped.
    const std::optional<double> b = subBatchBound(s, plan, sb);
    if (!b)
      return 0;
    least = std::min(least, *b);
  }
  return least;
}

} // namespace memfit::pipeline
