//===- PipelineChunks.cpp - Exact plans with the batch in chunks ----------===//
//
// A model with BatchNorm keeps its semantics only at whole batches. Where a
// whole batch does not fit (or only with heavy offload and recomputation),
// the batch is split into chunks inside the round (Chunk.h) and the split
// graph is planned like any other, at its chunk size.
//
//===----------------------------------------------------------------------===//
#include "compiler/support/Diagnostics.h"
#include "passes/search/PipelineSteps.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace memfit::pipeline {
namespace {

/// Graphs too large for the bound (kBoundGuided tasks once split): a plan
/// this close to the ideal time is not worth more chunks, and more chunks
/// stop being tried at a count this much slower than the best, or after
/// two counts in a row no faster. The times are not monotone in the count
/// (VGG-16 with BatchNorm at b64 in 25% of its ideal peak: 489, 485, 520,
/// 382 and 466 ms at 4 to 64 chunks), but a count far slower, or a second
/// slower one, seldom precedes a faster one.
constexpr double kCloseEnough = 0.01;
constexpr double kNearlyAsFast = 0.10;
constexpr int kSlowerCountsInARow = 2;

/// A proven bound of every plan of `cg`'s round in its order, `b` samples
/// a chunk, under the request's budget: its tasks' time where that is
/// already no faster than `fastest`, else the bound pass's (a probe plan
/// holding what iterationBound reads of one: the order, the arena and one
/// round); none for a graph too large for the bound, or where it finds
/// none.
std::optional<double> countBound(const ChunkedGraph &cg, const Tables &tables,
                                 const PlanRequest &r, int64_t b,
                                 double fastest) {
  // Every task runs at least once, one after another on the compute
  // stream, each no faster than its fastest algorithm: where that alone
  // is no faster than `fastest`, the program need not be solved.
  double tasks = 0;
  for (TaskId t : cg.order)
    tasks += tables.full->fastest(t).seconds;
  if (tasks >= fastest)
    return tasks;
  if (cg.tg.tasks.size() > kBoundGuided)
    return std::nullopt;
  Plan probe;
  probe.batch = r.batch;
  probe.subBatch = b;
  probe.numSubBatches = 1;
  probe.budget = r.budget;
  probe.libraryReserve = r.libraryReserve;
  probe.residentBytes = cg.tg.weightSideBytes();
  for (TaskId t : cg.order) {
    Instr in{InstrKind::Run};
    in.task = t;
    (cg.tg.tasks[t].kind == TaskKind::Update ? probe.update : probe.round)
        .push_back(in);
  }
  auto bound = iterationBound(cg.tg, probe, *tables.full, nullptr, {});
  if (!bound)
    return std::nullopt;
  return bound->seconds;
}

} // namespace

Tables chunkedTables(const ChunkedGraph &cg, const CostTableFn &tableAt,
                     int64_t batch) {
  auto owned = std::make_shared<const CostTable>(
      chunkedCosts(cg, tableAt(batch / cg.tg.chunks)));
  return {.full = owned.get(), .owned = owned};
}

PlanRequest chunkRequest(const PlanRequest &resolved, int64_t chunk) {
  PlanRequest cr = resolved;
  cr.batch = cr.forcedSubBatch = chunk;
  cr.bound = cr.chunking = false;
  return cr;
}

namespace {

/// When more chunks stop being worth planning where no bound can say: each
/// count's time (planned, or its bound where that ruled it out) against
/// the fastest count before it (kCloseEnough, kNearlyAsFast,
/// kSlowerCountsInARow).
class StopRule {
public:
  explicit StopRule(double ideal) : ideal(ideal) {}
  /// Count the next count's time (a plan's, or at least this).
  void see(double t) {
    if (t >= fastest) {
      if (t > fastest * (1 + kNearlyAsFast) ||
          ++slowerInARow == kSlowerCountsInARow)
        stop = true;
    } else {
      slowerInARow = 0;
      fastest = t;
      if (t <= ideal * (1 + kCloseEnough))
        stop = true;
    }
  }
  bool stopped() const { return stop; }
  double best() const { return fastest; }

private:
  double fastest = std::numeric_limits<double>::infinity(), ideal;
  int slowerInARow = 0;
  bool stop = false;
};

} // namespace

llvm::Expected<std::vector<ChunkedCandidate>>
searchChunks(SearchState &s, const std::vector<int32_t> &counts) {
  const PlanRequest &resolved = s.r;
  const bool forced = s.forceChunks;
  std::vector<ChunkedCandidate> found;
  // A count whose proven bound is no faster than the fastest plan so far,
  // whole batches or chunks, has no plan that could win: not planned.
  const double whole = s.best ? s.best->sim.iterationSeconds
                              : std::numeric_limits<double>::infinity();
  StopRule rule(s.idealSeconds);
  for (int32_t k : counts) {
    int64_t b = resolved.batch / k;
    LowerBound floor = computeLowerBound(s.tg, b);
    if (floor.bytes > resolved.budget && !forced)
      continue; // the split graph's floor is at least this
    auto split = splitAlongBatch(s.tg, s.order, k);
    if (!split) {
      if (forced)
        return split.takeError();
      if (llvm::Error e = dropInfeasible(split.takeError()))
        return std::move(e);
      return found; // the model cannot be split (a frozen BatchNorm)
    }
    auto cg = std::make_shared<const ChunkedGraph>(std::move(*split));
    Tables tables = chunkedTables(*cg, s.tableAt, resolved.batch);
    CostTableFn fn = [&tables](int64_t) -> const CostTable & {
      return *tables.full;
    };
    const double fastest = std::min(whole, rule.best());
    std::optional<double> bound;
    if (!forced && fastest < std::numeric_limits<double>::infinity())
      bound = countBound(*cg, tables, resolved, b, fastest);
    if (bound && *bound >= fastest) {
      s.record.chunksPruned.push_back({k, *bound});
      rule.see(*bound);
      continue;
    }
    if (!bound && rule.stopped())
      break; // more chunks stopped helping
    PlanRequest cr = chunkRequest(resolved, b);
    int64_t eq3 = 0; // the split graph's: not the outcome's
    auto variants =
        firstPhaseVariants(cg->tg, fn, cg->order, cr, cr.budget, eq3);
    if (!variants) {
      if (forced)
        return variants.takeError();
      if (llvm::Error e = dropInfeasible(variants.takeError()))
        return std::move(e);
      continue;
    }
    CandidateSearch search({cg->tg, fn, cg->order, cr, cr}, std::nullopt);
    search.runAll(*variants);
    if (search.best()) {
      std::vector<Variant> chen = chenPhaseVariants(cg->tg, cg->order, cr, b);
      search.runAll(chen);
      std::vector<Variant> chain =
          chainPhaseVariants(cg->tg, fn, cg->order, cr, cr.budget, b);
      search.runAll(chain);
    }
    s.recordSearch(search.record(), /*withTried=*/false);
    auto c = search.takeBest();
    if (!c) {
      if (forced)
        return c.takeError();
      if (llvm::Error e = dropInfeasible(c.takeError()))
        return std::move(e);
      if (!found.empty())
        break;
      continue;
    }
    c->plan.batch = resolved.batch;
    c->plan.chunks = k;
    double t = c->sim.iterationSeconds;
    s.record.chunksTried.push_back({k, t});
    found.push_back(ChunkedCandidate{cg, std::move(*c)});
    rule.see(t);
  }
  // Fastest first; on a tie the fewer chunks (tried first).
  std::stable_sort(found.begin(), found.end(),
                   [](const ChunkedCandidate &a, const ChunkedCandidate &b) {
                     return a.c.sim.iterationSeconds < b.c.sim.iterationSeconds;
                   });
  return found;
}

} // namespace memfit::pipeline
