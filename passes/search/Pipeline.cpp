//===- Pipeline.cpp - From task graph and costs to a verified plan --------===//
//
// planTraining: the ideal plan, the budget (PipelineBudget.cpp), the
// candidates (PipelineCandidates.cpp), the search (PipelineSearch.cpp) and
// the winner's verification, here.
//
//===----------------------------------------------------------------------===//
#include "passes/search/Pipeline.h"

#include "compiler/support/Diagnostics.h"
#include "passes/search/PipelineSteps.h"
#include "passes/analysis/Verify.h"

#include <chrono>

namespace memfit {
namespace pipeline {

llvm::Expected<Candidate> planWith(const TaskGraph &tg, const CostTable &full,
                                   const CostTable *last,
                                   const std::vector<TaskId> &order,
                                   const ScheduleOptions &so) {
  auto plan = schedule(tg, full, order, so);
  if (!plan)
    return plan.takeError();
  Candidate c{std::move(*plan), {}};
  c.sim = simulate(tg, c.plan, full, last);
  return c;
}

llvm::Expected<Candidate>
planWith(const TaskGraph &tg, const CostTable &full, const CostTable *last,
         const std::vector<TaskId> &order, const PlanRequest &req,
         std::vector<bool> drop, bool allowRecompute, double cutoffSeconds,
         std::vector<bool> offload, bool lookPastIdle) {
  ScheduleOptions so{req.policy,     req.budget,    req.batch,  std::move(drop),
                     allowRecompute, cutoffSeconds, req.inPlace};
  so.offloadAfterForward = std::move(offload);
  so.lookPastIdle = lookPastIdle;
  return planWith(tg, full, last, order, so);
}

Tables tablesFor(const CostTableFn &tableAt, int64_t batch, int64_t subBatch) {
  Tables t{&tableAt(subBatch), nullptr, nullptr};
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
  PlanRequest idealReq = req;
  idealReq.policy = Policy::Ideal;
  Tables t = tablesFor(tableAt, req.batch, req.batch);
  return planWith(tg, *t.full, t.last, order, idealReq, {}, true, 0);
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
searchWholeRounds(const TaskGraph &tg, const CostTableFn &tableAt,
                  const std::vector<TaskId> &order, const PlanRequest &req,
                  const PlanRequest &resolved, PlanOutcome &out,
                  Candidate ideal, std::optional<Candidate> *beforeChain) {
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
    if (beforeChain && search.best())
      *beforeChain = *search.best();
    // Third: the chain program's keep / recompute / offload decisions.
    std::vector<Variant> chain = chainPhaseVariants(
        tg, tableAt, order, req, resolved.budget, search.best()->plan.subBatch);
    search.runAll(chain);
  }
  return search.takeBest();
}

/// memfit's last phase, on the fastest plan of whole rounds and on the
/// fastest in chunks: the bound's relaxation at its order and sub-batch (or
/// chunk), rounded into drop and offload sets and scheduled; kept when
/// strictly faster. `g`, `tb`, `fn`, `gOrder` and `gr` are the graph, tables
/// and request the plan was made with (a chunked graph's at the chunk
/// size). The bound is the one the summary reports when the plan wins, so
/// there this phase costs only its schedules.
llvm::Error guideByBound(const TaskGraph &g, const Tables &tb,
                         const CostTableFn &fn,
                         const std::vector<TaskId> &gOrder,
                         const PlanRequest &req, const PlanRequest &gr,
                         PlanOutcome &out, Candidate &best,
                         std::optional<Candidate> *lost = nullptr) {
  if (g.tasks.size() > kBoundGuided)
    return llvm::Error::success();
  std::shared_ptr<const KnownBound> known = proveBound(g, best.plan, tb);
  best.bound = known;
  if (!known->bound)
    return llvm::Error::success();
  PlanOutcome scratch;
  CandidateSearch search(g, fn, gOrder, req, gr, scratch, std::nullopt);
  if (!lost) {
    llvm::Expected<Candidate> seed = best;
    search.merge(Variant{best.plan.subBatch}, seed);
  }
  std::vector<Variant> guided =
      boundPhaseVariants(g, *known->bound, best.plan.subBatch);
  if (lost && guided.empty())
    return llvm::Error::success(); // no guided plan to compare or keep
  search.runAll(guided);
  out.abandoned += scratch.abandoned;
  auto c = search.takeBest();
  if (!c) {
    if (!lost)
      return c.takeError();
    // No guided plan fits: best stays. A broken invariant still surfaces.
    llvm::Error err = c.takeError();
    llvm::Error internal = takeInternalErrors(err);
    llvm::consumeError(std::move(err));
    return internal;
  }
  if (c->sim.iterationSeconds < best.sim.iterationSeconds) {
    c->plan.batch = best.plan.batch;
    c->plan.chunks = best.plan.chunks;
    c->bound = known->holdsFor(c->plan) ? known : nullptr;
    best = std::move(*c);
  } else if (lost) {
    c->plan.batch = best.plan.batch;
    c->plan.chunks = best.plan.chunks;
    *lost = std::move(*c);
  }
  return llvm::Error::success();
}

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
  auto d =
      solveOptimal(tg, round, *tb.full, r.budget - tg.weightSideBytes(), opts);
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
    ScheduleOptions so{way == 2 ? Policy::Memfit : Policy::Optimal,
                       r.budget,
                       r.batch,
                       d->drop,
                       true,
                       0,
                       r.inPlace};
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
  if (!solved) {
    llvm::Error err = solved.takeError();
    if (llvm::Error internal = takeInternalErrors(err)) {
      llvm::consumeError(std::move(err));
      return internal;
    }
    llvm::consumeError(std::move(err));
    return llvm::Error::success();
  }
  if (solved->sim.iterationSeconds < best.sim.iterationSeconds) {
    solved->plan.policy = "memfit (as optimal)";
    solved->plan.batch = best.plan.batch;
    solved->plan.chunks = best.plan.chunks;
    best = std::move(*solved);
  }
  return llvm::Error::success();
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
  if (asked.libraryReserve < 0)
    return makeErrorF("the library reserve must not be negative, got {0} "
                      "bytes",
                      asked.libraryReserve);
  auto t0 = std::chrono::steady_clock::now();
  PlanRequest req = asked;
  // The optimal policy solves at the order and sub-batch memfit's own
  // search picks: the search runs under memfit's rules.
  const bool optimal = req.policy == Policy::Optimal;
  if (optimal)
    req.policy = Policy::Memfit;
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
  size_t roundTasks = roundTaskCount(tg, order);
  if (optimal) {
    // Refused before any schedule is made.
    if (roundTasks > OptimalOptions{}.maxTasks)
      return makeErrorF("--policy optimal solves graphs of up to {0} tasks "
                        "per round (forward and backward); this one has {1}: "
                        "use --policy memfit",
                        OptimalOptions{}.maxTasks, roundTasks);
  }
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

  // The resolved request is the plan's own: the reserve taken off once
  // here, everything after plans the weight side and the arena in what is
  // left.
  PlanRequest r = req;
  auto budget = resolveBudget(tg, req, out.lowerBound, out.idealPeakBytes);
  if (!budget)
    return budget.takeError();
  out.budget = *budget;
  r.budget = planShare(req, *budget);
  r.libraryReserve = 0;

  std::optional<Candidate> beforeChain;
  llvm::Expected<Candidate> best =
      forceChunks
          ? llvm::Expected<Candidate>(makeError("no plan in chunks"))
          : searchWholeRounds(
                tg, tableAt, order, req, r, out, std::move(*ideal),
                roundTasks <= kOptimalInSearch ? &beforeChain : nullptr);
  if (best && req.policy == Policy::Memfit && !optimal &&
      roundTasks <= kOptimalInSearch) {
    // memfit's search includes the integral program's decisions on small
    // graphs, at the sub-batch it picked: kept when strictly faster. Before
    // the chunks, which the program does not solve, are compared.
    const Candidate &at = beforeChain ? *beforeChain : *best;
    if (auto err = tryOptimal(tg, tablesFor(tableAt, r.batch, at.plan.subBatch),
                              order, r, at, *best))
      return err;
  }
  const bool guide = req.policy == Policy::Memfit && !optimal;
  if (best && guide) {
    Tables tb = tablesFor(tableAt, r.batch, best->plan.subBatch);
    std::optional<Candidate> lost;
    if (auto err =
            guideByBound(tg, tb, tableAt, order, req, r, out, *best, &lost))
      return err;
    if (req.refine)
      if (auto err = refineDecisions(tg, tb, order, r, out, *best,
                                     lost ? &*lost : nullptr))
        return err;
  }
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
    if (*split && guide) {
      const ChunkedGraph &cg = *(*split)->graph;
      Tables tb = chunkedTables(cg, tableAt, req.batch);
      CostTableFn fn = [&tb](int64_t) -> const CostTable & { return *tb.full; };
      PlanRequest gr = chunkRequest(r, (*split)->c.plan.subBatch);
      std::optional<Candidate> lost;
      if (auto err = guideByBound(cg.tg, tb, fn, cg.order, gr, gr, out,
                                  (*split)->c, &lost))
        return err;
      // The integral program's decisions on a small split graph, as on
      // small whole rounds, where the chunks are ahead: kept when strictly
      // faster.
      bool ahead = !best || (*split)->c.sim.iterationSeconds <
                                best->sim.iterationSeconds;
      if (ahead && roundTaskCount(cg.tg, cg.order) <= kOptimalInChunks)
        if (auto err =
                tryOptimal(cg.tg, tb, cg.order, gr, (*split)->c, (*split)->c))
          return err;
      // Refined when within reach of the whole-batch plan (itself refined):
      // the refinement gains up to a few percent (ResNet-50 at batch 256
      // and 25% on the H100 model: 2 chunks 19.0% -> 13.9% over the ideal,
      // the whole batch 20.9% -> 16.1%).
      bool close =
          !best || (*split)->c.sim.iterationSeconds <
                       best->sim.iterationSeconds * (1 + kRefineWithin);
      if (close && req.refine)
        if (auto err = refineDecisions(cg.tg, tb, cg.order, gr, out,
                                       (*split)->c, lost ? &*lost : nullptr))
          return err;
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
  if (optimal) {
    // At the order and sub-batch (or chunks) of memfit's plan: a chunked
    // graph is one more task graph to the program.
    const TaskGraph &g = out.scheduledGraph(tg);
    const std::vector<TaskId> &gOrder =
        out.chunked ? out.chunked->order : order;
    size_t tasks = roundTaskCount(g, gOrder);
    if (tasks > OptimalOptions{}.maxTasks)
      return makeErrorF(
          "--policy optimal solves graphs of up to {0} tasks per round "
          "(forward and backward); the batch in {1} chunks has {2}: use "
          "--policy memfit",
          OptimalOptions{}.maxTasks, best->plan.chunks, tasks);
    Tables tb = out.chunked ? chunkedTables(*out.chunked, tableAt, req.batch)
                            : tablesFor(tableAt, r.batch, best->plan.subBatch);
    PlanRequest rr = out.chunked ? chunkRequest(r, best->plan.subBatch) : r;
    OptimalOutcome o;
    auto solved = planOptimal(g, tb, gOrder, rr, *best, o);
    if (!solved)
      return solved.takeError();
    solved->plan.batch = best->plan.batch;
    solved->plan.chunks = best->plan.chunks;
    best = std::move(*solved);
    out.optimal = o;
  }

  const TaskGraph &planned = out.scheduledGraph(tg);
  std::shared_ptr<const KnownBound> known = best->bound;
  // The schedule was made for the plan's share; the plan states the device
  // budget and the reserve, whose difference is that share.
  best->plan.budget = out.budget;
  best->plan.libraryReserve = req.libraryReserve;
  if (auto err = finishOutcome(planned, std::move(*best), out))
    return err;
  out.exact = !coupled || out.plan.numSubBatches == 1;
  if (req.bound) {
    // Proved already where the search's bound phase ran on this space.
    if (!known || !known->holdsFor(out.plan)) {
      Tables tb = out.chunked
                      ? chunkedTables(*out.chunked, tableAt, req.batch)
                      : tablesFor(tableAt, req.batch, out.plan.subBatch);
      known = proveBound(planned, out.plan, tb);
    }
    out.bound = known->bound;
    out.boundWhy = known->why;
  }
  out.planSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

} // namespace memfit
