//===- Verify.h - Independent proof that a plan is right --------*- C++ -*-===//
//
// Checks a Plan against its TaskGraph without trusting the scheduler. The
// program checked is two rounds, the update, and one more round, so hazards
// across the round and iteration boundaries are caught too. Ordering across
// streams is derived from events alone (vector clocks); issue order orders
// only instructions on the same stream.
//
// Rules (each violation names the rule and the instruction):
//  budget       library reserve + resident bytes + arena bytes <= budget;
//               every residency and workspace lies inside the arena.
//  structure    ids in range; instructions on their own streams; every wait
//               follows a record of its event in the same section; each task
//               runs once per round (updates once per iteration).
//  ready        before a task runs, each block it reads is resident with all
//               writes made so far, and the write or copy that put it there
//               happens-before the task.
//  copy-out     an offload copies a block's current content after the write
//               that produced it.
//  copy-in      a prefetch brings back the current content from a host copy
//               whose copy-out happens-before it.
//  overlap      two residencies whose bytes overlap never coexist: every
//               access of the earlier one happens-before the first access of
//               the later one (an in-place task may hand its input's bytes to
//               its output).
//  resident     weights and optimizer state are read after their last write
//               and written after every earlier read.
//  home         a weight homed on the host is updated there, by the host,
//               from the content its round sent home: its gradient leaves
//               every round with a copy-out of its latest content, and the
//               update reads and writes host memory alone.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_VERIFY_H
#define MEMFIT_PASSES_VERIFY_H

#include "compiler/ir/Plan.h"

#include "llvm/Support/Error.h"

namespace memfit {

/// Success, or an error whose message names the rule that broke and where.
llvm::Error verifyPlan(const TaskGraph &tg, const Plan &plan);

} // namespace memfit

#endif
