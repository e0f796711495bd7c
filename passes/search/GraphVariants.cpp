//===- GraphVariants.cpp - Planning one of several graphs of a model ------===//
//
// chooseAttention: the budget resolved once, each graph planned, the
// fastest feasible kept (GraphVariants.h).
//
//===----------------------------------------------------------------------===//
#include "passes/search/GraphVariants.h"

#include "compiler/support/Diagnostics.h"
#include "passes/search/Tiers.h"

#include <algorithm>
#include <optional>

namespace memfit {

std::vector<int64_t> fusionCounts(int64_t n) {
  std::vector<int64_t> ks = {0};
  for (int64_t q = 1; q <= 4; ++q)
    if (int64_t k = (n * q + 3) / 4; k != ks.back())
      ks.push_back(k);
  return ks;
}

namespace {

/// `req` with its budget in bytes: a percentage is of the model's own
/// ideal peak (as written), so every graph plans under the same bytes.
llvm::Expected<PlanRequest> sameBytes(const AttentionVariants &v,
                                      const PlanRequest &req) {
  if (req.budgetFraction <= 0)
    return req;
  auto yard = v.plan(0, idealYardstick(req));
  if (!yard)
    return yard.takeError();
  return withBudget(
      req, resolveBudget(req, yard->idealPeakBytes, yard->lowerBound.bytes));
}

} // namespace

/// Marks every failed outcome in `tried` as seen: they are left for an
/// error that ends the search.
void dropOutcomes(std::vector<VariantOutcome> &tried) {
  for (VariantOutcome &t : tried)
    if (!t.outcome)
      llvm::consumeError(t.outcome.takeError());
}

llvm::Expected<VariantChoice> chooseAttention(const AttentionVariants &v,
                                              const PlanRequest &req) {
  auto same = sameBytes(v, req);
  if (!same)
    return same.takeError();
  std::vector<int64_t> counts = fusionCounts(v.subgraphs);
  if (req.budgetIsLowerBound)
    counts = {v.subgraphs};
  // With the host tier the most fused graph goes first and chooses the
  // homing (every homing is a whole search); the others start from its
  // choice and home more only where they need it.
  PlanRequest r = *same;
  if (r.hostBudget > 0)
    std::reverse(counts.begin(), counts.end());
  VariantChoice choice;
  std::optional<size_t> best;
  for (int64_t k : counts) {
    auto outcome = v.plan(k, r);
    if (!outcome && !outcome.errorIsA<Infeasible>()) {
      dropOutcomes(choice.tried);
      return outcome.takeError();
    }
    if (outcome && r.hostBudget > 0 && r.homeBytesAtLeast < 0) {
      r.homeBytesAtLeast = outcome->homed
                               ? outcome->homed->homedBytes(Tier::Host) +
                                     outcome->homed->homedBytes(Tier::Nvme)
                               : 0;
      r.homeKeepsCopies = outcome->homed && keepsCopiesOnGpu(*outcome->homed);
    }
    // The fastest feasible plan; on a tie the one with more fused.
    if (outcome) {
      const VariantOutcome *b = best ? &choice.tried[*best] : nullptr;
      double t = outcome->plan.summary.plannedSeconds;
      double bt = b ? b->outcome->plan.summary.plannedSeconds : 0;
      if (!b || t < bt || (t == bt && k > b->fused))
        best = choice.tried.size();
    }
    choice.tried.push_back({k, std::move(outcome)});
  }
  if (!best) {
    // None fits: the most fused graph's reason (its lower bound is lowest).
    llvm::Error last = choice.tried.back().outcome.takeError();
    dropOutcomes(choice.tried);
    return std::move(last);
  }
  choice.chosen = *best;
  return std::move(choice);
}

} // namespace memfit
