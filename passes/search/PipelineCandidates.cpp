//===- PipelineCandidates.cpp - The schedules a policy tries --------------===//
#include "compiler/support/Diagnostics.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/schedule/Recompute.h"
#include "passes/search/ChainDP.h"
#include "passes/search/PipelineSteps.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <iterator>
#include <set>

namespace memfit::pipeline {
namespace {

/// Beyond this many tasks memfit tries fewer sub-batch sizes.
constexpr size_t kManyTasks = 20000;

/// memfit's joint search: every sub-batch size with offload alone, with
/// evictions free to drop what is cheaper to recompute, and with the cheap
/// forward outputs (everything but convolutions) recomputed as well.
std::vector<Variant> memfitVariants(const TaskGraph &tg,
                                    const CostTableFn &tableAt,
                                    const std::vector<TaskId> &order,
                                    const PlanRequest &req, int64_t budget,
                                    int64_t eq3SubBatch) {
  std::vector<Variant> variants;
  std::vector<int64_t> sizes = req.forcedSubBatch
                                   ? std::vector<int64_t>{req.forcedSubBatch}
                                   : subBatchCandidates(eq3SubBatch, req.batch);
  // Eq. 3's sub-batch first and the rest by their distance from it, so
  // the likely winners set a tight cutoff early and the sub-batches far
  // from it are abandoned sooner (the winner does not depend on the
  // order: ties go to the larger sub-batch).
  std::stable_sort(sizes.begin(), sizes.end(), [&](int64_t x, int64_t y) {
    auto dist = [&](int64_t v) {
      return std::abs(std::log2(double(v) / double(eq3SubBatch)));
    };
    return dist(x) != dist(y) ? dist(x) < dist(y) : x > y;
  });
  // Very deep networks: the three nearest Eq. 3's only, to keep planning
  // in seconds (the far ones rarely win and each costs a full schedule).
  if (tg.tasks.size() > kManyTasks && sizes.size() > 3)
    sizes.resize(3);
  for (int64_t subBatch : sizes) {
    // Running in place frees memory but moves blocks elsewhere, and a
    // different placement can leave less room for a workspace later:
    // try without it too.
    for (bool inPlace : {true, false}) {
      if (inPlace && !req.inPlace)
        continue;
      variants.push_back({subBatch, {}, false, std::nullopt, inPlace});
      variants.push_back({subBatch, {}, true, std::nullopt, inPlace});
      variants.push_back(
          {subBatch, superNeuronsDropSet(tg), true, std::nullopt, inPlace});
    }
    // moDNN's rules at every sub-batch (its own choice, Eq. 3's, among
    // them), so memfit is never worse than moDNN: memfit's rules are
    // usually faster but not always (on GoogLeNet at batch 256 and half
    // the ideal peak on the H100 model, moDNN's at sub-batch 128 are).
    variants.push_back({subBatch, {}, false, Policy::Modnn});
    // The cheapest blocks to recompute, as many bytes as the liveness
    // peak exceeds the budget (and twice that): on a fast GPU where
    // copies cannot hide, regenerating a BatchNorm or activation output
    // is much cheaper than moving it.
    const CostTable &costs = tableAt(subBatch);
    int64_t excess = livenessArenaNeed(tg, order, costs, req.inPlace) -
                     arenaBytes(tg, budget);
    if (excess > 0)
      for (int64_t bytes : {excess, 2 * excess})
        variants.push_back({subBatch, cheapestDropSet(tg, costs, bytes), true,
                            std::nullopt, true});
  }
  return variants;
}

/// What a generator of first candidates reads: `whole` is the batch, or
/// the sub-batch forced; the generators that consult Eq. 3 set
/// `eq3SubBatch`.
struct FirstPhase {
  const TaskGraph &tg;
  const CostTableFn &tableAt;
  const std::vector<TaskId> &order;
  const PlanRequest &req;
  int64_t budget, whole;
  int64_t &eq3SubBatch;
};

// Neither the ideal case nor vDNN splits the batch or drops anything.
std::vector<Variant> wholeBatch(const FirstPhase &in) {
  return {{.subBatch = in.whole}};
}

std::vector<Variant> chenSegments(const FirstPhase &in) {
  std::vector<Variant> variants;
  for (auto &drop : chenCandidates(in.tg, in.order, in.whole))
    variants.push_back({.subBatch = in.whole, .drop = std::move(drop)});
  return variants;
}

std::vector<Variant> superNeurons(const FirstPhase &in) {
  return {{.subBatch = in.whole, .drop = superNeuronsDropSet(in.tg)}};
}

std::vector<Variant> eq3(const FirstPhase &in) {
  in.eq3SubBatch = selectSubBatch(in.tg, in.tableAt, in.req.batch, in.budget);
  return {{.subBatch =
               in.req.forcedSubBatch ? in.req.forcedSubBatch : in.eq3SubBatch,
           .allowRecompute = false}};
}

std::vector<Variant> joint(const FirstPhase &in) {
  in.eq3SubBatch = selectSubBatch(in.tg, in.tableAt, in.req.batch, in.budget);
  return memfitVariants(in.tg, in.tableAt, in.order, in.req, in.budget,
                        in.eq3SubBatch);
}

/// The generator of each kind of first candidates (PolicyDef::candidates).
struct Generator {
  FirstCandidates kind;
  std::vector<Variant> (*make)(const FirstPhase &);
};
constexpr Generator kGenerators[] = {
    {FirstCandidates::WholeBatch, wholeBatch},
    {FirstCandidates::ChenSegments, chenSegments},
    {FirstCandidates::SuperNeurons, superNeurons},
    {FirstCandidates::Eq3, eq3},
    {FirstCandidates::Joint, joint},
};

} // namespace

llvm::Expected<std::vector<Variant>>
firstPhaseVariants(const TaskGraph &tg, const CostTableFn &tableAt,
                   const std::vector<TaskId> &order, const PlanRequest &req,
                   int64_t budget, int64_t &eq3SubBatch) {
  if (req.forcedSubBatch > 0 && req.forcedSubBatch > req.batch)
    return makeErrorF("--sub-batch {0} is larger than the batch {1}",
                      req.forcedSubBatch, req.batch);
  const FirstCandidates kind = policyDef(req.policy).candidates;
  const Generator *g =
      std::find_if(std::begin(kGenerators), std::end(kGenerators),
                   [&](const Generator &x) { return x.kind == kind; });
  assert(g != std::end(kGenerators) && "a generator for every kind");
  return g->make({.tg = tg,
                  .tableAt = tableAt,
                  .order = order,
                  .req = req,
                  .budget = budget,
                  .whole = req.forcedSubBatch ? req.forcedSubBatch : req.batch,
                  .eq3SubBatch = eq3SubBatch});
}

std::vector<Variant> chenPhaseVariants(const TaskGraph &tg,
                                       const std::vector<TaskId> &order,
                                       const PlanRequest &req,
                                       int64_t bestSubBatch) {
  std::set<int64_t> sizes{bestSubBatch};
  if (!req.forcedSubBatch)
    sizes.insert(req.batch);
  std::vector<Variant> chen;
  for (int64_t subBatch : sizes)
    for (auto &drop : chenCandidates(tg, order, subBatch)) {
      chen.push_back({.subBatch = subBatch, .drop = drop});
      chen.push_back({.subBatch = subBatch,
                      .drop = std::move(drop),
                      .as = Policy::ChenSqrt});
    }
  return chen;
}

std::vector<Variant> chainPhaseVariants(const TaskGraph &tg,
                                        const CostTableFn &tableAt,
                                        const std::vector<TaskId> &order,
                                        const PlanRequest &req, int64_t budget,
                                        int64_t subBatch) {
  std::vector<TaskId> round;
  for (TaskId t : order)
    if (tg.tasks[t].kind != TaskKind::Update)
      round.push_back(t);
  const CostTable &costs = tableAt(subBatch);
  // The program sees no fragmentation, workspaces or prefetch room: plan it
  // to the whole arena and to less of it; without offload too, where copies
  // would not hide as the program assumes.
  std::vector<ChainTry> tries{
      {1.0, true}, {0.9, true}, {0.8, true}, {1.0, false}};
  // Very deep networks: one try, to keep planning in seconds (each
  // schedule of ResNet-10001 takes about a second).
  if (tg.tasks.size() > kManyTasks)
    tries.resize(1);
  ChainOptions opts;
  opts.inPlace = req.inPlace;
  if (tg.tasks.size() > kManyTasks) {
    opts.memoryLevels = 64;
    opts.volumeLevels = 4;
  }
  // The tries share one chain and are each deterministic: solved side by
  // side (a third of a large model's planning time), used in the order
  // above.
  std::vector<std::optional<ChainDecisions>> solved = solveChainTries(
      tg, round, costs, arenaBytes(tg, budget), opts, tries, forEachSideBySide);
  std::vector<Variant> out;
  for (size_t k = 0; k < tries.size(); ++k) {
    const ChainTry &t = tries[k];
    std::optional<ChainDecisions> &d = solved[k];
    if (!d)
      continue;
    bool seen = false;
    for (const Variant &v : out)
      seen = seen || (v.drop == d->drop && v.offload == d->offload);
    if (seen)
      continue;
    Variant v{subBatch, std::move(d->drop)};
    v.offload = std::move(d->offload);
    v.chain = true;
    // Under the optimal policy's rules: memfit's eviction pricing for what
    // the decisions leave over, without its early offload (which sizes
    // itself by the liveness peak, not knowing the drop set).
    v.as = Policy::Optimal;
    std::vector<Variant> ways;
    if (!t.offload) {
      Variant chen = v;
      chen.as = Policy::ChenSqrt;
      ways.push_back(std::move(chen));
    }
    ways.push_back(std::move(v));
    // And with the look-ahead going on past tasks that prefetch nothing:
    // the decisions keep their recomputes and copies in the backward pass,
    // whose inputs then come in earlier.
    for (size_t w = 0, n = ways.size(); w < n; ++w) {
      Variant far = ways[w];
      far.lookPastIdle = false;
      ways.push_back(std::move(far));
    }
    for (Variant &w : ways)
      out.push_back(std::move(w));
  }
  return out;
}

namespace {

std::vector<TaskId> boundOrder(const Plan &plan) {
  std::vector<TaskId> order;
  for (const Instr &in : plan.round)
    if (in.kind == InstrKind::Run && !in.recompute)
      order.push_back(in.task);
  return order;
}

} // namespace

bool KnownBound::holdsFor(const Plan &p) const {
  return p.numSubBatches == numSubBatches &&
         p.planBudget() - p.residentBytes == arena && boundOrder(p) == order;
}

std::shared_ptr<const KnownBound>
proveBound(const TaskGraph &tg, const Plan &plan, const Tables &tb) {
  auto k = std::make_shared<KnownBound>();
  k->order = boundOrder(plan);
  k->numSubBatches = plan.numSubBatches;
  k->arena = plan.planBudget() - plan.residentBytes;
  k->bound = iterationBound(tg, plan, *tb.full, tb.last, {}, &k->why);
  return k;
}

std::vector<Variant> boundPhaseVariants(const TaskGraph &tg,
                                        const IterationBound &bound,
                                        int64_t subBatch) {
  std::vector<Variant> out;
  const BoundHints &h = bound.hints;
  for (const BoundHints::Shares *shares : {&h.peak, &h.mean}) {
    if (shares->offload.size() != tg.blocks.size())
      continue;
    // Rounded at one half: a block goes the way that holds the larger share
    // of it, when that share is at least half.
    Variant v{subBatch};
    v.drop.assign(tg.blocks.size(), false);
    v.offload.assign(tg.blocks.size(), false);
    bool any = false;
    for (size_t b = 0; b < tg.blocks.size(); ++b) {
      double rec = shares->recompute[b], off = shares->offload[b];
      if (rec >= 0.5 && rec >= off)
        v.drop[b] = any = true;
      else if (off >= 0.5)
        v.offload[b] = any = true;
    }
    bool seen = !any;
    for (const Variant &o : out)
      seen = seen || (o.drop == v.drop && o.offload == v.offload);
    if (seen)
      continue;
    // As the chain program's decisions: under the optimal policy's rules,
    // kept only when strictly faster.
    v.as = Policy::Optimal;
    v.chain = v.guided = true;
    out.push_back(std::move(v));
  }
  return out;
}

} // namespace memfit::pipeline
