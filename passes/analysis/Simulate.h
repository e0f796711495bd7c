//===- Simulate.h - Replay a finished plan on the cost model ----*- C++ -*-===//
//
// Replays a Plan's instruction lists on a CostTable, independent of the
// scheduler that wrote them: streams run their instructions in order, waits
// hold a stream until the event's recorded work is done. Gives the predicted
// iteration time, the compute stream's stall time, the bytes moved each way,
// and the arena's use: its peak and the most bytes live at one instant (the
// no-fragmentation bound Glow's allocation efficiency compares against).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SIMULATE_H
#define MEMFIT_PASSES_SIMULATE_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "compiler/ir/Simulation.h"

#include <utility>
#include <vector>

namespace memfit {

/// `full` prices a full sub-batch; `last` the last one when it is smaller
/// (null when the batch divides evenly).
Simulation simulate(const TaskGraph &tg, const Plan &plan,
                    const CostTable &full, const CostTable *last = nullptr);

/// Fills plan.summary from a simulation (ideal time from the ideal plan's).
void summarize(Plan &plan, const Simulation &sim, double idealSeconds);

} // namespace memfit

#endif
