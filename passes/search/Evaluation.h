//===- Evaluation.h - The evaluation program's plan -------------*- C++ -*-===//
//
// A trainer validates between optimizer steps with a second program: the
// model's forward pass and a loss that measures (TaskGraph::evaluation),
// planned here beside the training plan. It runs in the training plan's
// arena, which holds nothing between iterations, while the weights, their
// gradients and optimizer state stay where they are: so its arena may use
// what the training arena has, and its weights keep the homes the training
// plan gave them.
//
// Guarantees: the plan returned passed the verifier; its arena is no
// larger than the training plan's; every weight and working copy it reads
// has the training plan's home; it offloads nothing (the trainer keeps no
// host slots for it). Its sub-batch is the planner's choice: evaluation
// normalizes with running statistics, so any split of the batch computes
// what the whole batch does.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SEARCH_EVALUATION_H
#define MEMFIT_PASSES_SEARCH_EVALUATION_H

#include "passes/search/Pipeline.h"

namespace memfit {

/// Plans `evalTg` (built from the same model as `trained`, the graph the
/// training plan `train` schedules) under the training plan's budget. Sets
/// `evalTg`'s homes from `trained`'s. Errors say why no evaluation plan
/// exists (they are the trainer's reason to refuse validation, not a
/// failed compile).
llvm::Expected<PlanOutcome> planEvaluation(TaskGraph &evalTg,
                                           const TaskGraph &trained,
                                           const PlanOutcome &train,
                                           const CostTableFn &tableAt,
                                           PlanRequest req);

} // namespace memfit

#endif
