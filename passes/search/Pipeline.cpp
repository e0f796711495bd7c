//===- Pipeline.cpp - From task graph and costs to a verified plan --------===//
//
// planTraining: the ideal plan, the budget (PipelineBudget.cpp), the
// candidates (PipelineCandidates.cpp), the search (PipelineSearch.cpp) and
// the winner's verification, here.
//
//===----------------------------------------------------------------------===//
#include "passes/search/Pipeline.h"

#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Verify.h"
#include "passes/search/PipelineSteps.h"
#include "passes/search/SubBatch.h"
#include "passes/search/Tiers.h"

#include <chrono>

namespace memfit {

PlanRequest idealYardstick(PlanRequest req) {
  req.policy = Policy::Ideal;
  req.budgetFraction = 0;
  req.budgetIsLowerBound = false;
  req.bound = false;
  req.forcedChunks = 0;
  return req;
}

namespace pipeline {

llvm::Expected<Candidate> planWith(const TaskGraph &tg, const CostTable &full,
                                   const CostTable *last,
                                   const std::vector<TaskId> &order,
                                   const ScheduleOptions &so) {
  auto plan = schedule(tg, full, order, so);
  if (!plan)
    return plan.takeError();
  Candidate c{.plan = std::move(*plan)};
  c.sim = simulate(tg, c.plan, full, last);
  return c;
}

Tables tablesFor(const CostTableFn &tableAt, int64_t batch, int64_t subBatch) {
  Tables t{.full = &tableAt(subBatch)};
  int64_t rest = batch % subBatch;
  if (rest != 0 && batch > subBatch)
    t.last = &tableAt(rest);
  return t;
}

namespace {

/// memfit's own search tries the optimal policy's decisions on rounds of up
/// to this many tasks (the program then solves in well under a second).
constexpr size_t kOptimalInSearch = 200;
/// The same for a round with the batch in chunks, whose tasks are smaller
/// and more alike: ResNet-18's 418 in two chunks solve in about 0.5 s.
constexpr size_t kOptimalInChunks = 450;

/// The tasks of a round in `order` (the updates left out).
size_t roundTaskCount(const TaskGraph &tg, const std::vector<TaskId> &order) {
  size_t n = 0;
  for (TaskId t : order)
    n += tg.tasks[t].kind != TaskKind::Update;
  return n;
}

/// The ideal policy's plan at the whole batch: the yardstick for overhead
/// and the ideal peak.
llvm::Expected<Candidate> planIdeal(const TaskGraph &tg,
                                    const CostTableFn &tableAt,
                                    const std::vector<TaskId> &order,
                                    const PlanRequest &req) {
  Tables t = tablesFor(tableAt, req.batch, req.batch);
  return planWith(tg, *t.full, t.last, order,
                  {.policy = Policy::Ideal,
                   .budget = req.budget,
                   .batch = req.batch,
                   .inPlace = req.inPlace});
}

/// A plan in chunks this much slower than the whole batch's is still
/// refined (PipelineRefine.cpp).
constexpr double kRefineWithin = 0.10;

/// A whole-batch plan further than this from the ideal time makes memfit
/// try the batch in chunks too (where it must stay whole to be exact).
constexpr double kChunkWhenOver = 0.01;

/// The policy's candidates in rounds of whole (sub-)batches, and the
/// fastest of them; `beforeChain`, when given, gets the fastest before the
/// chain program's candidates (the integral program solves at its
/// sub-batch, as it did before the chain program existed).
llvm::Expected<Candidate>
searchWholeRounds(SearchState &s, std::optional<Candidate> *beforeChain) {
  auto variants = firstPhaseVariants(s.tg, s.tableAt, s.order, s.req,
                                     s.r.budget, s.eq3SubBatch);
  if (!variants)
    return variants.takeError();
  CandidateSearch search(s.space(), std::move(s.ideal));
  search.runAll(*variants);
  if (s.policy->phases.chenAndChain && search.best()) {
    // Second phase: at the best sub-batch so far and at the whole batch, the
    // recompute sets of Chen et al. (segments between cut values), with
    // memfit's rules and with theirs, so memfit is never worse than
    // chen-sqrt either.
    std::vector<Variant> chen =
        chenPhaseVariants(s.tg, s.order, s.req, search.best()->plan.subBatch);
    search.runAll(chen);
    if (beforeChain && search.best())
      *beforeChain = *search.best();
    // Third: the chain program's keep / recompute / offload decisions.
    std::vector<Variant> chain =
        chainPhaseVariants(s.tg, s.tableAt, s.order, s.req, s.r.budget,
                           search.best()->plan.subBatch);
    search.runAll(chain);
  }
  s.recordSearch(search.record(), /*withTried=*/true);
  return search.takeBest();
}

} // namespace

llvm::Expected<Guided> guideByBound(const PlanSpace &sp, const Tables &tb,
                                    const Candidate &best) {
  Guided out;
  if (sp.g.tasks.size() > kBoundGuided)
    return out;
  out.bound = proveBound(sp.g, best.plan, tb);
  if (!out.bound->bound)
    return out;
  std::vector<Variant> guided =
      boundPhaseVariants(sp.g, *out.bound->bound, best.plan.subBatch);
  if (guided.empty())
    return out; // no guided plan to compare or keep
  CandidateSearch search(sp, std::nullopt);
  search.runAll(guided);
  out.abandoned = search.record().abandoned;
  auto c = search.takeBest();
  if (!c) {
    // No guided plan fits: best stays. Any other error surfaces.
    if (llvm::Error err = dropInfeasible(c.takeError()))
      return std::move(err);
    return out;
  }
  c->plan.batch = best.plan.batch;
  c->plan.chunks = best.plan.chunks;
  if (c->sim.iterationSeconds < best.sim.iterationSeconds) {
    c->bound = out.bound->holdsFor(c->plan) ? out.bound : nullptr;
    out.faster = std::move(*c);
  } else {
    out.lost = std::move(*c);
  }
  return out;
}

namespace {

/// The optimal policy: the integral program at the order and sub-batch of
/// memfit's own plan `memfit`, scheduled with its decisions.
/// `tb`: the tables of memfit's plan (a chunked graph's own).
llvm::Expected<Candidate> planOptimal(const TaskGraph &tg, const Tables &tb,
                                      const std::vector<TaskId> &order,
                                      const PlanRequest &r,
                                      const Candidate &memfit,
                                      OptimalOutcome &o) {
  std::vector<TaskId> round;
  for (TaskId t : order)
    if (tg.tasks[t].kind != TaskKind::Update)
      round.push_back(t);
  OptimalOptions opts;
  opts.inPlace = r.inPlace;
  auto t0 = std::chrono::steady_clock::now();
  auto d = solveOptimal(tg, round, *tb.full, arenaBytes(tg, r.budget), opts);
  o.solveSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!d)
    return d.takeError();
  o.objectiveSeconds = d->objectiveSeconds;
  o.proven = d->proven;
  o.nodes = d->nodes;
  o.maxNodes = opts.maxNodes;
  o.candidates = d->candidates;
  o.rows = d->rows;
  o.columns = d->columns;
  for (size_t k = 0; k < d->drop.size(); ++k) {
    o.offloaded += !d->leaveAfter[k].empty();
    o.recomputed += d->drop[k];
  }
  o.memfitSeconds = memfit.sim.iterationSeconds;
  // The decisions as a schedule, three ways, the fastest kept (ties to the
  // first): the offloaded blocks leave after their last forward use, as
  // the program has it; or they stay until room is needed (the scheduler
  // then frees what the moment needs, which can prefetch less); or only
  // the recompute choices are kept and memfit's own early offload moves
  // blocks out (the program's offload timing can be optimistic: it
  // ignores copy latencies and that a prefetch needs its room while it
  // runs).
  std::optional<Candidate> best;
  llvm::Error firstErr = llvm::Error::success();
  for (int way = 0; way < 3; ++way) {
    ScheduleOptions so{.policy = way == 2 ? Policy::Memfit : Policy::Optimal,
                       .budget = r.budget,
                       .batch = r.batch,
                       .dropAfterForward = d->drop,
                       .inPlace = r.inPlace};
    if (way < 2)
      so.offloadAfterForward = d->offload;
    if (way == 0)
      so.offloadLeaveAfter = d->leaveAfter;
    auto planned = planWith(tg, *tb.full, tb.last, order, so);
    if (!planned) {
      if (!firstErr)
        firstErr = planned.takeError();
      else
        llvm::consumeError(planned.takeError());
      continue;
    }
    Candidate c = std::move(*planned);
    c.plan.policy = "optimal";
    if (!best || c.sim.iterationSeconds < best->sim.iterationSeconds) {
      best = std::move(c);
      o.realization = way;
    }
  }
  if (!best)
    return std::move(firstErr);
  llvm::consumeError(std::move(firstErr));
  return std::move(*best);
}

/// memfit's search taking the integral program's decisions, solved at the
/// order and sub-batch (or chunk) of `at`, in place of `best` when strictly
/// faster. The program's own refusals (too little room for any per-block
/// answer) leave `best` as it is; internal errors return.
llvm::Error tryOptimal(const TaskGraph &g, const Tables &tb,
                       const std::vector<TaskId> &gOrder, const PlanRequest &gr,
                       const Candidate &at, Candidate &best) {
  OptimalOutcome o;
  auto solved = planOptimal(g, tb, gOrder, gr, at, o);
  if (!solved)
    return dropInfeasible(solved.takeError());
  if (solved->sim.iterationSeconds < best.sim.iterationSeconds) {
    solved->plan.policy = "memfit (as optimal)";
    solved->plan.batch = best.plan.batch;
    solved->plan.chunks = best.plan.chunks;
    best = std::move(*solved);
  }
  return llvm::Error::success();
}

/// The flags and their combinations refused before any schedule is made;
/// the order and what the request's flags imply for the search.
llvm::Expected<bool> checkRequest(SearchState &s) {
  PlanRequest &req = s.req;
  if (req.batch <= 0)
    return makeError("the batch size must be positive");
  if (req.libraryReserve < 0)
    return makeErrorF("the library reserve must not be negative, got {0} "
                      "bytes",
                      req.libraryReserve);
  // The optimal policy solves at the order and sub-batch memfit's own
  // search picks: the search runs under memfit's rules.
  s.policy = &policyDef(req.policy);
  if (s.policy->searchesAs)
    req.policy = *s.policy->searchesAs;
  // Exact by default: whole batches where sub-batches would change
  // statistics over the batch.
  s.coupled = statisticsOverBatch(s.tg);
  // Whole batches, or (a policy with the phase, sub-batch not forced) the
  // batch in chunks inside the round. Under --sub-batch-statistics too:
  // the exact plan in chunks is a candidate beside the inexact sub-batches,
  // kept where it is faster (tools/bench/forced.py found it up to 14%
  // faster than the sub-batches on tiny-bn).
  s.chunking = s.coupled && req.chunking && s.policy->phases.chunks &&
               req.forcedSubBatch == 0;
  s.forceChunks = req.forcedChunks > 1;
  if (s.forceChunks) {
    if (s.policy->rules.unbounded)
      return makeError("--chunks plans under a budget; the ideal policy has "
                       "none");
    if (req.forcedSubBatch > 0 && req.forcedSubBatch < req.batch)
      return makeError("--chunks and --sub-batch split the batch in two "
                       "different ways: give one of them");
    if (req.batch % req.forcedChunks != 0)
      return makeErrorF("--chunks {0} does not divide the batch of {1}",
                        req.forcedChunks, req.batch);
    s.chunking = false;
  }
  if (s.coupled && !req.subBatchStatistics) {
    if (req.forcedSubBatch > 0 && req.forcedSubBatch < req.batch)
      return makeErrorF(
          "--sub-batch {0} would compute BatchNorm statistics over sub-batches "
          "of {0} instead of the batch of {1}, which changes what the model "
          "computes; add --sub-batch-statistics to allow it",
          req.forcedSubBatch, req.batch);
    req.forcedSubBatch = req.batch;
  }
  s.order = taskOrder(s.tg, req.order);
  s.roundTasks = roundTaskCount(s.tg, s.order);
  if (s.policy->phases.optimal && s.roundTasks > OptimalOptions{}.maxTasks)
    return makeErrorF("--policy optimal solves graphs of up to {0} tasks "
                      "per round (forward and backward); this one has {1}: "
                      "use --policy memfit",
                      OptimalOptions{}.maxTasks, s.roundTasks);
  return true;
}

/// The memory floor, the ideal plan and the budget resolved against them:
/// the reserve taken off once here, everything after plans the weight side
/// and the arena in what is left.
llvm::Expected<bool> resolveIdealAndBudget(SearchState &s) {
  const PlanRequest &req = s.req;
  // The smallest sub-batch a plan may use sets the floor.
  if (s.forceChunks)
    s.lowerBound = computeLowerBound(s.tg, req.batch / req.forcedChunks);
  else if (!s.coupled || req.subBatchStatistics)
    s.lowerBound = computeLowerBound(s.tg, 1);
  else
    s.lowerBound = s.chunking ? exactLowerBound(s.tg, req.batch)
                              : computeLowerBound(s.tg, req.batch);
  auto ideal = planIdeal(s.tg, s.tableAt, s.order, req);
  if (!ideal)
    return ideal.takeError();
  s.idealSeconds = ideal->sim.iterationSeconds;
  s.idealPeakBytes = ideal->plan.totalBytes();
  s.ideal = std::move(*ideal);
  auto budget = budgetFor(s.tg, req, s.lowerBound, s.idealPeakBytes);
  if (!budget)
    return budget.takeError();
  s.budget = *budget;
  s.r = req;
  s.r.budget = budget->plan();
  s.r.libraryReserve = 0;
  return true;
}

} // namespace

/// The policy's candidates in whole (sub-)batches (searchWholeRounds).
llvm::Expected<bool> wholeRounds(SearchState &s) {
  if (s.forceChunks) {
    s.setBest(makeError("no plan in chunks"));
    return false;
  }
  s.setBest(searchWholeRounds(
      s, s.roundTasks <= kOptimalInSearch ? &s.beforeChain : nullptr));
  return true;
}

/// memfit's search includes the integral program's decisions on small
/// graphs, at the sub-batch it picked: kept when strictly faster. Before
/// the chunks, which the program does not solve, are compared.
llvm::Expected<bool> optimalInSearch(SearchState &s) {
  if (!s.best || !s.policy->phases.polish || s.roundTasks > kOptimalInSearch)
    return false;
  const Candidate &at = s.beforeChain ? *s.beforeChain : *s.best;
  if (auto err =
          tryOptimal(s.tg, tablesFor(s.tableAt, s.r.batch, at.plan.subBatch),
                     s.order, s.r, at, *s.best))
    return err;
  return true;
}

namespace {

/// The bound-guided phase on `best`, a plan of `sp`: `best` replaced by a
/// strictly faster guided plan, `lost` the guided plan that lost to it.
llvm::Error guide(SearchState &s, const PlanSpace &sp, const Tables &tb,
                  Candidate &best, std::optional<Candidate> &lost) {
  auto g = guideByBound(sp, tb, best);
  if (!g)
    return g.takeError();
  s.record.abandoned += g->abandoned;
  if (g->bound)
    best.bound = std::move(g->bound);
  if (g->faster)
    best = std::move(*g->faster);
  lost = std::move(g->lost);
  return llvm::Error::success();
}

/// The refinement phase on `best`, a plan of `sp` (and from `lost` too,
/// where the bound-guided phase left one): `best` replaced when it found a
/// faster plan.
llvm::Error refine(SearchState &s, const PlanSpace &sp, const Tables &tb,
                   Candidate &best, const std::optional<Candidate> &lost) {
  auto refined = refineDecisions(sp, tb, best, lost ? &*lost : nullptr);
  if (!refined)
    return refined.takeError();
  s.record.refineTries += refined->tries;
  s.record.refineChanged += refined->changed;
  if (refined->faster)
    best = std::move(*refined->faster);
  return llvm::Error::success();
}

} // namespace

/// memfit's last phases on the whole-round plan: guided by the bound, then
/// refined (from the guided plan that lost too, where one did).
llvm::Expected<bool> guideAndRefine(SearchState &s) {
  if (!s.best || !s.policy->phases.polish)
    return false;
  Tables tb = tablesFor(s.tableAt, s.r.batch, s.best->plan.subBatch);
  if (auto err = guide(s, s.space(), tb, *s.best, s.lost))
    return err;
  if (s.req.refine)
    if (auto err = refine(s, s.space(), tb, *s.best, s.lost))
      return err;
  return true;
}

namespace {

/// The bound-guided phase, the integral program and the refinement on the
/// fastest plan in chunks (memfit's own search), each where it can help
/// against the whole-batch plan `whole`. `c`: the plan on the split graph
/// `cg`.
llvm::Error polishChunks(SearchState &s, const ChunkedGraph &cg, Candidate &c,
                         const std::optional<Candidate> &whole) {
  Tables tb = chunkedTables(cg, s.tableAt, s.req.batch);
  CostTableFn fn = [&tb](int64_t) -> const CostTable & { return *tb.full; };
  PlanRequest gr = chunkRequest(s.r, c.plan.subBatch);
  PlanSpace sp{cg.tg, fn, cg.order, gr, gr};
  std::optional<Candidate> lost;
  if (auto err = guide(s, sp, tb, c, lost))
    return err;
  // The integral program's decisions on a small split graph, as on small
  // whole rounds, where the chunks are ahead: kept when strictly faster.
  bool ahead = !whole || c.sim.iterationSeconds < whole->sim.iterationSeconds;
  if (ahead && roundTaskCount(cg.tg, cg.order) <= kOptimalInChunks)
    if (auto err = tryOptimal(cg.tg, tb, cg.order, gr, c, c))
      return err;
  // Refined when within reach of the whole-batch plan (itself refined): the
  // refinement gains up to a few percent (ResNet-50 at batch 256 and 25% on
  // the H100 model: 2 chunks 19.0% -> 13.9% over the ideal, the whole batch
  // 20.9% -> 16.1%).
  bool close = !whole || c.sim.iterationSeconds <
                             whole->sim.iterationSeconds * (1 + kRefineWithin);
  if (close && s.req.refine)
    return refine(s, sp, tb, c, lost);
  return llvm::Error::success();
}

} // namespace

/// The batch in chunks inside the round (PipelineChunks.cpp): when asked
/// for, or when memfit's whole-batch plan is further than kChunkWhenOver
/// from the ideal time where the batch must stay whole; kept when faster.
llvm::Expected<bool> chunks(SearchState &s) {
  bool far = !s.best || s.best->sim.iterationSeconds >
                            s.idealSeconds * (1 + kChunkWhenOver);
  if (s.chunksSearched || (!s.forceChunks && !(s.chunking && far)))
    return false;
  s.chunksSearched = true;
  std::vector<int32_t> counts =
      s.forceChunks ? std::vector<int32_t>{s.req.forcedChunks}
                    : chunkCounts(s.req.batch, s.tg.tasks.size());
  auto split = searchChunks(s, counts);
  if (!split)
    return split.takeError();
  // Each count is polished in full (its unpolished plan may polish to a
  // faster one, as with sub-batches: ResNet-18 b64 at 25%, 4 chunks polish
  // to 47.45 ms where 8 reached 48.79), fastest first, unless its proven
  // bound is no faster than the best plan so far. Graphs too large for the
  // bound polish the fastest count alone, where it can help against `best`.
  for (size_t i = 0; i < split->size(); ++i) {
    auto &[cg, c] = (*split)[i];
    const bool bounded = cg->tg.tasks.size() <= kBoundGuided;
    if (!bounded && i > 0)
      break;
    if (bounded && s.best && s.policy->phases.polish) {
      Tables tb = chunkedTables(*cg, s.tableAt, s.req.batch);
      auto known = proveBound(cg->tg, c.plan, tb);
      if (known->bound && known->bound->seconds >= s.best->sim.iterationSeconds)
        continue;
    }
    if (s.policy->phases.polish)
      if (auto err = polishChunks(s, *cg, c, bounded ? std::nullopt : s.best))
        return err;
    if (!s.best || c.sim.iterationSeconds < s.best->sim.iterationSeconds) {
      s.setBest(std::move(c));
      s.chunked = std::move(cg);
    }
  }
  return true;
}

namespace {

/// The optimal policy: the integral program at the order and sub-batch (or
/// chunks) of memfit's plan; a chunked graph is one more task graph to the
/// program.
llvm::Expected<bool> optimalPolicy(SearchState &s) {
  if (!s.policy->phases.optimal || !s.best)
    return false;
  Candidate &best = *s.best;
  const TaskGraph &g = s.chunked ? s.chunked->tg : s.tg;
  const std::vector<TaskId> &gOrder = s.chunked ? s.chunked->order : s.order;
  size_t tasks = roundTaskCount(g, gOrder);
  if (tasks > OptimalOptions{}.maxTasks)
    return makeErrorF("--policy optimal solves graphs of up to {0} tasks per "
                      "round (forward and backward); the batch in {1} chunks "
                      "has {2}: use --policy memfit",
                      OptimalOptions{}.maxTasks, best.plan.chunks, tasks);
  Tables tb = s.chunked ? chunkedTables(*s.chunked, s.tableAt, s.req.batch)
                        : tablesFor(s.tableAt, s.r.batch, best.plan.subBatch);
  PlanRequest rr = s.chunked ? chunkRequest(s.r, best.plan.subBatch) : s.r;
  OptimalOutcome o;
  auto solved = planOptimal(g, tb, gOrder, rr, best, o);
  if (!solved)
    return solved.takeError();
  solved->plan.batch = best.plan.batch;
  solved->plan.chunks = best.plan.chunks;
  const int64_t memfitSubBatch = best.plan.subBatch;
  const double memfitSeconds = best.sim.iterationSeconds;
  best = std::move(*solved);
  // Optimal over the sub-batch too: the program at every other sub-batch
  // the search allows, unless the proven bound there (this order, that
  // sub-batch) is no faster than the plan so far, so that nothing skipped
  // could have won. Not for a plan in chunks or a forced sub-batch.
  if (!s.chunked && s.req.forcedSubBatch == 0)
    for (int64_t sb : subBatchCandidates(s.eq3SubBatch, s.req.batch)) {
      if (sb == memfitSubBatch)
        continue;
      std::optional<double> bound = subBatchBound(s, best.plan, sb);
      if (bound && *bound >= best.sim.iterationSeconds)
        continue;
      OptimalOutcome at;
      auto c = planOptimal(g, tablesFor(s.tableAt, s.r.batch, sb), gOrder, s.r,
                           best, at);
      ++o.subBatchesSolved;
      o.solveSeconds += at.solveSeconds;
      if (!c) {
        if (llvm::Error err = dropInfeasible(c.takeError()))
          return std::move(err);
        continue;
      }
      if (c->sim.iterationSeconds < best.sim.iterationSeconds) {
        c->plan.batch = best.plan.batch;
        best = std::move(*c);
        at.subBatchesSolved = o.subBatchesSolved;
        at.solveSeconds = o.solveSeconds;
        o = at;
      }
    }
  o.memfitSeconds = memfitSeconds;
  s.optimalOutcome = o;
  return true;
}

/// The search, in order. Each phase reads what the ones before it left in
/// the state; none writes the outcome, which finish() builds.
constexpr Phase kPhases[] = {
    checkRequest,   resolveIdealAndBudget, wholeRounds, optimalInSearch,
    guideAndRefine, otherSubBatches,       otherOrder,  chunks,
    optimalPolicy};

/// The outcome, built once from the search's state: the best plan
/// verified, summarised, and with the proven bound where asked for.
llvm::Expected<PlanOutcome> finish(SearchState &s) {
  if (!s.best)
    return std::move(s.noBest);
  PlanOutcome out;
  out.budget = s.budget.device;
  out.lowerBound = s.lowerBound;
  out.idealSeconds = s.idealSeconds;
  out.idealPeakBytes = s.idealPeakBytes;
  out.eq3SubBatch = s.eq3SubBatch;
  out.chunked = std::move(s.chunked);
  out.optimal = s.optimalOutcome;
  out.tried = std::move(s.record.tried);
  out.abandoned = s.record.abandoned;
  out.chunksTried = std::move(s.record.chunksTried);
  out.chunksPruned = std::move(s.record.chunksPruned);
  out.refineTries = s.record.refineTries;
  out.refineChanged = s.record.refineChanged;
  Candidate &best = *s.best;
  const TaskGraph &planned = out.scheduledGraph(s.tg);
  std::shared_ptr<const KnownBound> known = best.bound;
  // The schedule was made for the plan's share; the plan states the device
  // budget and the reserve, whose difference is that share.
  best.plan.budget = s.budget.device;
  best.plan.libraryReserve = s.budget.reserve;
  if (auto err = verifyPlan(planned, best.plan))
    return err;
  out.plan = std::move(best.plan);
  out.sim = std::move(best.sim);
  summarize(out.plan, out.sim, out.idealSeconds);
  out.exact = !s.coupled || out.plan.numSubBatches == 1;
  if (s.req.bound) {
    // Proved already where the search's bound phase ran on this space.
    if (!known || !known->holdsFor(out.plan)) {
      Tables tb = out.chunked
                      ? chunkedTables(*out.chunked, s.tableAt, s.req.batch)
                      : tablesFor(s.tableAt, s.req.batch, out.plan.subBatch);
      known = proveBound(planned, out.plan, tb);
    }
    out.bound = known->bound;
    out.boundWhy = known->why;
    if (out.bound)
      out.spaceBoundSeconds = spaceBound(s, out.plan, out.bound->seconds);
  }
  out.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - s.t0)
          .count();
  return std::move(out);
}

} // namespace
} // namespace pipeline

namespace {

/// The search on one graph, its homes fixed.
llvm::Expected<PlanOutcome> planOneGraph(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &asked) {
  pipeline::SearchState s(tg, tableAt, asked);
  for (pipeline::Phase phase : pipeline::kPhases)
    if (auto ran = phase(s); !ran)
      return ran.takeError();
  return pipeline::finish(s);
}

} // namespace

llvm::Expected<PlanOutcome> planTraining(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &asked) {
  if (asked.hostBudget > 0)
    return planAcrossTiers(tg, tableAt, asked, planOneGraph);
  return planOneGraph(tg, tableAt, asked);
}

llvm::Expected<PlanOrReason> planOrReason(const TaskGraph &tg,
                                          const CostTableFn &tableAt,
                                          const PlanRequest &req) {
  auto o = planTraining(tg, tableAt, req);
  if (o)
    return PlanOrReason{.outcome = std::move(*o)};
  llvm::Error err = o.takeError();
  if (llvm::Error internal = takeInternalErrors(err)) {
    llvm::consumeError(std::move(err));
    return std::move(internal);
  }
  return PlanOrReason{.reason = llvm::toString(std::move(err))};
}

} // namespace memfit
