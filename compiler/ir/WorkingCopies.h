//===- WorkingCopies.h - f32 working copies of homed weights --*- C++ -*-===//
//
// ZeRO-Offload's layout for fp32 and tf32 plans: a weight homed on the host
// keeps its value on the GPU too, as a working copy of its own type that
// every task but its update reads; the weight block stays the master that
// the host's update writes at home, and the trainer uploads the copy once
// per step (TaskGraph::copyStaysOnGpu). 16-bit plans have such copies from
// the start (their tensor-core operators read them); this adds them where
// a plan of full precision wants them.
//
// Guarantees: what the model computes is unchanged (the copy holds the
// master's value, bit for bit, whenever a task reads it); the graph still
// passes verifyTaskGraph; only weights that are trained (an update writes
// them) and homed off the GPU get a copy, homed with their master.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_WORKINGCOPIES_H
#define MEMFIT_COMPILER_IR_WORKINGCOPIES_H

#include "compiler/ir/TaskGraph.h"

namespace memfit {

/// Gives every trained weight of `tg` homed off the GPU that has no working
/// copy an f32 one (an fp32 or tf32 graph, not split across data-parallel
/// ranks; none otherwise), read in its place by every task but its update,
/// which refreshes it. Returns the number of copies added.
int32_t addFullPrecisionCopies(TaskGraph &tg);

} // namespace memfit

#endif
