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

namespace memfit::pipeline {
namespace {

/// A plan this close to the ideal time is not worth more chunks.
constexpr double kCloseEnough = 0.01;
/// More chunks stop being tried at a count this much slower than the
/// best, or after two counts in a row no faster: the times are not
/// monotone in the count (VGG-16 with BatchNorm at b64 in 25% of its ideal
/// peak: 489, 485, 520, 382 and 466 ms at 4 to 64 chunks), but a count far
/// slower, or a second slower one, seldom precedes a faster one.
constexpr double kNearlyAsFast = 0.10;
constexpr int kSlowerCountsInARow = 2;

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

llvm::Expected<std::vector<ChunkedCandidate>>
searchChunks(SearchState &s, const std::vector<int32_t> &counts) {
  const PlanRequest &resolved = s.r;
  const bool forced = s.forceChunks;
  std::vector<ChunkedCandidate> found;
  double bestSeconds = 0;
  int slowerInARow = 0;
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
    const bool slower = !found.empty() && t >= bestSeconds;
    found.push_back(ChunkedCandidate{cg, std::move(*c)});
    if (slower) {
      if (t > bestSeconds * (1 + kNearlyAsFast) ||
          ++slowerInARow == kSlowerCountsInARow)
        break; // more chunks stopped helping
      continue;
    }
    slowerInARow = 0;
    bestSeconds = t;
    if (t <= s.idealSeconds * (1 + kCloseEnough))
      break;
  }
  // Fastest first; on a tie the fewer chunks (tried first).
  std::stable_sort(found.begin(), found.end(),
                   [](const ChunkedCandidate &a, const ChunkedCandidate &b) {
                     return a.c.sim.iterationSeconds < b.c.sim.iterationSeconds;
                   });
  return found;
}

} // namespace memfit::pipeline
