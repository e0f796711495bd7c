//===- TimeBound.h - A proven lower bound on iteration time -----*- C++ -*-===//
//
// How close is a plan to the best possible? This pass answers for the
// plans of one space: the task order and sub-batch of a given plan, under
// its budget, with any mix of keeping, offloading and recomputing. It
// solves, with CBC's linear programming, a relaxation of that space in the
// spirit of Checkmate (Jain et al., MLSys 2020) with its decisions made
// fractional: per block and per step where the block is live but not used,
// how much of it is absent, coming back by copy-in or by re-running its
// forward task. Every plan of
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
//    each such forward task once, at its fastest algorithm; a re-run needs
//    its inputs, and one past its last use at t was kept (its bytes count),
//    copied back, or made again by its own forward task;
//  - t's start >= the tasks before t, at their fastest algorithms.
//
// The bound is the linear program's optimum (a simplex solve: the same
// inputs give the same bound). Only the steps most over the budget get
// constraints (BoundOptions::maxSteps). Copy latencies, event waits,
// workspaces, the later rounds' input loads and the arena's fragmentation
// are left out, which only lowers it.
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
  /// the bound stays a bound; this keeps the solve well under a second.
  size_t maxSteps = 24;
  /// Steps are added most over the budget first until the next would pass
  /// this many columns.
  int64_t maxColumns = 20000;
};

/// The relaxation's optimal point, per block (zero where a block had no
/// column): the share of it away from the device by copy and by recompute,
/// at the step most over the budget (`peak`) and on average over the steps
/// the first round's program constrains (`mean`). Not a plan (the shares
/// are fractional, the steps few), but a place for a search to start
/// (boundPhaseVariants, PipelineSteps.h).
struct BoundHints {
  struct Shares {
    std::vector<double> offload, recompute;
  };
  Shares peak, mean;
};

struct IterationBound {
  double seconds = 0; // a lower bound on the iteration time
  BoundHints hints;
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
