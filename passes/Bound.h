//===- Bound.h - A proven lower bound on a plan's iteration time -*- C++
//-*-===//
//
// How close is a plan to the best possible? This pass answers for the
// plans of one space: the task order and sub-batch of a given plan, under
// its budget, with any mix of keeping, offloading and recomputing. It
// solves, with CBC, a mixed-integer relaxation of that space in the spirit
// of Checkmate (Jain et al., MLSys 2020): per block and per step where the
// block is live but not used, whether it is absent, and if so whether it
// comes back by copy-in or by re-running its forward task. Every plan of
// the space maps to a feasible point whose objective is at most the plan's
// predicted round time:
//
//  - memory: at each step, the live bytes (in place where the task may run
//    in place) less the absent ones fit the budget less the resident
//    weight side (no workspace, no fragmentation);
//  - a block absent at step t and restored by copy-in was copied out before
//    t starts and is copied back after it: t's start >= out-volume / d2h
//    rate and the round >= t's start + in-volume / h2d rate;
//  - a block absent at t and restored by recompute has its forward task run
//    again after t starts: the round >= t's start + the tasks from t on +
//    each such forward task once, at its fastest algorithm;
//  - t's start >= the tasks before t, at their fastest algorithms.
//
// The bound is CBC's best possible objective when it stops (optimal, or at
// its node limit, never a time limit, so the same inputs give the same
// bound), so it is a lower bound whether or not the search finished. Only
// the steps most over the budget get constraints (BoundOptions::maxSteps). Copy
// latencies, event waits, workspaces, the input loads and the arena's
// fragmentation are left out, which only lowers it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_BOUND_H
#define MEMFIT_PASSES_BOUND_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "compiler/ir/TaskGraph.h"

#include <optional>
#include <string>

namespace memfit {

struct BoundOptions {
  /// Steps whose constraints are kept: the ones most over the budget.
  /// Leaving a step's constraints out only relaxes the program further, so
  /// the bound stays a bound; this keeps the solve within a second.
  size_t maxSteps = 48;
  int64_t maxColumns = 40000; // larger relaxations are not attempted
  /// Programs with at most this many decisions are solved with them
  /// integral, for up to maxNodes branch-and-bound nodes (deterministic);
  /// larger ones as a linear program (a weaker bound, found in a second).
  int64_t maxIntegers = 4000;
  int maxNodes = 100;
};

struct IterationBound {
  double seconds = 0;   // a lower bound on the iteration time
  bool optimal = false; // CBC proved its relaxation's optimum
};

/// A lower bound on the iteration time of every plan with `plan`'s round
/// order and sub-batch under `plan`'s budget; `last` is the table of a
/// smaller last round (null when every round is full). None when the
/// relaxation is too large or CBC found no bound in time; `why` then says
/// which.
std::optional<IterationBound>
iterationBound(const TaskGraph &tg, const Plan &plan, const CostTable &full,
               const CostTable *last, const BoundOptions &opts,
               std::string *why = nullptr);

} // namespace memfit

#endif
