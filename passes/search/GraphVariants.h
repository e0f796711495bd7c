//===- GraphVariants.h - One of several graphs of a model --*- C++ -*-===//
//
//
// The search over graph variants: a model with attention planned as written
// and with more and more of its attention subgraphs fused, each graph
// under the same budget in bytes (a percentage resolved once, against the
// model as written). Guarantees: the fastest feasible plan is chosen, a tie
// to the more fused graph; only Infeasible outcomes are passed over, any
// other error of any variant is returned.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SEARCH_GRAPHVARIANTS_H
#define MEMFIT_PASSES_SEARCH_GRAPHVARIANTS_H

#include "passes/search/Pipeline.h"

#include <functional>
#include <vector>

namespace memfit {

/// The fused counts tried for `n` attention subgraphs: none, all, and
/// quarters between. The first ones in forward order go first: their scores
/// wait longest for the backward, so a plan under pressure offloads or
/// recomputes those before the others.
std::vector<int64_t> fusionCounts(int64_t n);

/// What the caller knows of the graphs: how many attention subgraphs the
/// model has, and how to plan the graph with the first `fused` of them
/// fused (0: the model as written) under a request. The caller builds each
/// graph (its task graph and costs) when asked, and keeps it.
struct AttentionVariants {
  int64_t subgraphs = 0;
  std::function<llvm::Expected<PlanOutcome>(int64_t fused,
                                            const PlanRequest &req)>
      plan;
};

/// One graph planned: its fused count and its outcome (an Infeasible error
/// where it has no plan).
struct VariantOutcome {
  int64_t fused;
  llvm::Expected<PlanOutcome> outcome;
};

/// Every graph tried, in the order planned, and the one chosen.
struct VariantChoice {
  std::vector<VariantOutcome> tried;
  size_t chosen = 0;
};

/// Plans the variants (fusionCounts, or only the all-fused graph when the
/// budget is the lower bound: its lower bound is never above the others')
/// and chooses. With no feasible variant, the most fused graph's reason.
llvm::Expected<VariantChoice> chooseAttention(const AttentionVariants &v,
                                              const PlanRequest &req);

} // namespace memfit

#endif
