//===- Pipeline.cpp - From task graph and costs to a verified plan --------===//
//
// planTraining: the ideal plan, the budget (PipelineBudget.cpp), the
// candidates (PipelineCandidates.cpp), the search (PipelineSearch.cpp) and
// the winner's verification, here.
//
//===----------------------------------------------------------------------===//
#include "passes/Pipeline.h"

#include "compiler/support/Diagnostics.h"
#include "passes/PipelineSteps.h"
#include "passes/Verify.h"

#include <chrono>

namespace memfit {
namespace pipeline {

llvm::Expected<Candidate>
planWith(const TaskGraph &tg, const CostTable &full, const CostTable *last,
         const std::vector<TaskId> &order, const PlanRequest &req,
         std::vector<bool> drop, bool allowRecompute, double cutoffSeconds) {
  auto plan = schedule(tg, full, order,
                       {req.policy, req.budget, req.batch, std::move(drop),
                        allowRecompute, cutoffSeconds, req.inPlace});
  if (!plan)
    return plan.takeError();
  Candidate c{std::move(*plan), {}};
  c.sim = simulate(tg, c.plan, full, last);
  return c;
}

Tables tablesFor(const CostTableFn &tableAt, int64_t batch, int64_t subBatch) {
  Tables t{tableAt(subBatch), std::nullopt};
  int64_t rest = batch % subBatch;
  if (rest != 0 && batch > subBatch)
    t.last = tableAt(rest);
  return t;
}

namespace {

/// The ideal policy's plan at the whole batch: the yardstick for overhead
/// and the ideal peak.
llvm::Expected<Candidate> planIdeal(const TaskGraph &tg,
                                    const CostTableFn &tableAt,
                                    const std::vector<TaskId> &order,
                                    const PlanRequest &req) {
  PlanRequest idealReq = req;
  idealReq.policy = Policy::Ideal;
  Tables t = tablesFor(tableAt, req.batch, req.batch);
  return planWith(tg, t.full, t.last ? &*t.last : nullptr, order, idealReq, {},
                  true, 0);
}

/// A whole-batch plan further than this from the ideal time makes memfit
/// try the batch in chunks too (where it must stay whole to be exact).
constexpr double kChunkWhenOver = 0.01;

/// The policy's candidates in rounds of whole (sub-)batches, and the
/// fastest of them.
llvm::Expected<Candidate> searchWholeRounds(const TaskGraph &tg,
                                            const CostTableFn &tableAt,
                                            const std::vector<TaskId> &order,
                                            const PlanRequest &req,
                                            const PlanRequest &resolved,
                                            PlanOutcome &out, Candidate ideal) {
  auto variants = firstPhaseVariants(tg, tableAt, order, req, resolved.budget,
                                     out.eq3SubBatch);
  if (!variants)
    return variants.takeError();
  CandidateSearch search(tg, tableAt, order, req, resolved, out,
                         std::move(ideal));
  search.runAll(*variants);
  if (req.policy == Policy::Memfit && search.best()) {
    // Second phase: at the best sub-batch so far and at the whole batch, the
    // recompute sets of Chen et al. (segments between cut values), with
    // memfit's rules and with theirs, so memfit is never worse than
    // chen-sqrt either.
    std::vector<Variant> chen =
        chenPhaseVariants(tg, order, req, search.best()->plan.subBatch);
    search.runAll(chen);
  }
  return search.takeBest();
}

/// Final verification: the winner must pass the verifier before it is
/// summarised and returned.
llvm::Error finishOutcome(const TaskGraph &tg, Candidate best,
                          PlanOutcome &out) {
  if (auto err = verifyPlan(tg, best.plan))
    return err;
  out.plan = std::move(best.plan);
  out.sim = std::move(best.sim);
  summarize(out.plan, out.sim, out.idealSeconds);
  return llvm::Error::success();
}

} // namespace
} // namespace pipeline

llvm::Expected<PlanOutcome> planTraining(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &asked) {
  using namespace pipeline;
  if (asked.batch <= 0)
    return makeError("the batch size must be positive");
  auto t0 = std::chrono::steady_clock::now();
  PlanRequest req = asked;
  // Exact by default: whole batches where sub-batches would change
  // statistics over the batch.
  bool coupled = statisticsOverBatch(tg);
  // Whole batches, or (memfit's own plans, sub-batch not forced) the batch
  // in chunks inside the round.
  bool chunking = coupled && !req.subBatchStatistics && req.chunking &&
                  req.policy == Policy::Memfit && req.forcedSubBatch == 0;
  bool forceChunks = req.forcedChunks > 1;
  if (forceChunks) {
    if (req.policy == Policy::Ideal)
      return makeError("--chunks plans under a budget; the ideal policy has "
                       "none");
    if (req.forcedSubBatch > 0 && req.forcedSubBatch < req.batch)
      return makeError("--chunks and --sub-batch split the batch in two "
                       "different ways: give one of them");
    if (req.batch % req.forcedChunks != 0)
      return makeErrorF("--chunks {0} does not divide the batch of {1}",
                        req.forcedChunks, req.batch);
    chunking = false;
  }
  if (coupled && !req.subBatchStatistics) {
    if (req.forcedSubBatch > 0 && req.forcedSubBatch < req.batch)
      return makeErrorF(
          "--sub-batch {0} would compute BatchNorm statistics over sub-batches "
          "of {0} instead of the batch of {1}, which changes what the model "
          "computes; add --sub-batch-statistics to allow it",
          req.forcedSubBatch, req.batch);
    req.forcedSubBatch = req.batch;
  }
  std::vector<TaskId> order = taskOrder(tg, req.order);
  PlanOutcome out;
  // The smallest sub-batch a plan may use sets the floor.
  if (forceChunks)
    out.lowerBound = computeLowerBound(tg, req.batch / req.forcedChunks);
  else if (!coupled || req.subBatchStatistics)
    out.lowerBound = computeLowerBound(tg, 1);
  else
    out.lowerBound = chunking ? exactLowerBound(tg, req.batch)
                              : computeLowerBound(tg, req.batch);

  auto ideal = planIdeal(tg, tableAt, order, req);
  if (!ideal)
    return ideal.takeError();
  out.idealSeconds = ideal->sim.iterationSeconds;
  out.idealPeakBytes = ideal->plan.totalBytes();

  PlanRequest r = req;
  auto budget = resolveBudget(tg, req, out.lowerBound, out.idealPeakBytes);
  if (!budget)
    return budget.takeError();
  r.budget = out.budget = *budget;

  llvm::Expected<Candidate> best =
      forceChunks ? llvm::Expected<Candidate>(makeError("no plan in chunks"))
                  : searchWholeRounds(tg, tableAt, order, req, r, out,
                                      std::move(*ideal));
  if (forceChunks ||
      (chunking && (!best || best->sim.iterationSeconds >
                                 out.idealSeconds * (1 + kChunkWhenOver)))) {
    std::vector<int32_t> counts = forceChunks
                                      ? std::vector<int32_t>{req.forcedChunks}
                                      : chunkCounts(req.batch, tg.tasks.size());
    auto split = searchChunks(tg, tableAt, order, r, counts, forceChunks, out);
    if (!split) {
      if (!best)
        llvm::consumeError(best.takeError());
      return split.takeError();
    }
    if (*split && (!best || (*split)->c.sim.iterationSeconds <
                                best->sim.iterationSeconds)) {
      if (!best)
        llvm::consumeError(best.takeError());
      best = std::move((*split)->c);
      out.chunked = std::move((*split)->graph);
    }
  }
  if (!best)
    return best.takeError();

  const TaskGraph &planned = out.scheduledGraph(tg);
  if (auto err = finishOutcome(planned, std::move(*best), out))
    return err;
  out.exact = !coupled || out.plan.numSubBatches == 1;
  if (req.bound) {
    Tables tb = out.chunked ? chunkedTables(*out.chunked, tableAt, req.batch)
                            : tablesFor(tableAt, req.batch, out.plan.subBatch);
    out.bound =
        iterationBound(planned, out.plan, tb.full,
                       tb.last ? &*tb.last : nullptr, {}, &out.boundWhy);
  }
  out.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

} // namespace memfit
