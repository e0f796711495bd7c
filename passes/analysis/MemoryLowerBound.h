//===- LowerBound.h - The smallest budget any plan can meet -----*- C++ -*-===//
//
// moDNN Eq. 2: the weight-side bytes (weights, their gradients, optimizer
// state; always resident) plus, over all tasks, the largest footprint of one
// task's inputs and outputs at sub-batch 1 with the zero-workspace algorithm.
// No schedule can go below it: that task's blocks must all be on the device
// while it runs. A budget under it is refused with the task named.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_LOWERBOUND_H
#define MEMFIT_PASSES_LOWERBOUND_H

#include "compiler/ir/TaskGraph.h"

namespace memfit {

struct LowerBound {
  int64_t bytes = 0;
  int64_t weightSideBytes = 0;
  int64_t taskBytes = 0; // the largest footprint at the sub-batch asked for
  TaskId task = -1;      // the task that sets it (first one on ties)
  int64_t subBatch = 1;  // the sub-batch it is computed at
};

/// At sub-batch `b` (1 gives Mmin; an exact plan of a model with BatchNorm
/// runs whole batches, so its floor is at the batch). Implicit-GEMM
/// convolutions and every other task run without workspace, so footprints are
/// blocks only, plus the 16-bit weight-gradient staging of a bf16 or fp16
/// program's convolution backward-filter (convGradStagingBytes).
LowerBound computeLowerBound(const TaskGraph &tg, int64_t subBatch = 1);

} // namespace memfit

#endif
