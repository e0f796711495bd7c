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

#include "compiler/CostTable.h"
#include "compiler/Plan.h"

#include <utility>
#include <vector>

namespace memfit {

struct Simulation {
  double roundSeconds = 0;     // one full sub-batch
  double lastRoundSeconds = 0; // the last, possibly smaller, sub-batch
  double updateSeconds = 0;
  double iterationSeconds = 0;
  double stallSeconds = 0;     // per iteration: compute idle, waiting on copies
  double computeSeconds = 0;   // per iteration: compute stream busy
  double recomputeSeconds = 0; // per iteration: of that, recomputing
  int64_t bytesToHost = 0, bytesToDevice = 0; // per iteration
  int64_t maxLiveBytes = 0; // arena bytes live at once (no fragmentation)
  double allocationEfficiency = 0; // maxLiveBytes / arena bytes
  std::vector<double> start, end;  // per round instruction (full sub-batch)
  /// Per update instruction, from the start of the update section.
  std::vector<double> updateStart, updateEnd;
  /// Per residency, when its bytes are held in a full round: from the start
  /// of its first access to the end of its last (-1, -1 when never used).
  std::vector<std::pair<double, double>> residencySpan;
};

/// `full` prices a full sub-batch; `last` the last one when it is smaller
/// (null when the batch divides evenly).
Simulation simulate(const TaskGraph &tg, const Plan &plan,
                    const CostTable &full, const CostTable *last = nullptr);

/// Fills plan.summary from a simulation (ideal time from the ideal plan's).
void summarize(Plan &plan, const Simulation &sim, double idealSeconds);

} // namespace memfit

#endif
