//===- Simulation.h - A plan's predicted timeline --------------*- C++ -*-===//
//
// What replaying a Plan on a CostTable predicts (passes/analysis/Simulate.h
// computes it): iteration time, stalls, traffic, the arena's use, and when each
// instruction and residency runs. Reports and traces read it; it lives in
// the IR so that codegen needs nothing from the planner.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_SIMULATION_H
#define MEMFIT_COMPILER_IR_SIMULATION_H

#include <cstdint>
#include <utility>
#include <vector>

namespace memfit {

struct Simulation {
  double roundSeconds = 0;     // one full sub-batch
  double lastRoundSeconds = 0; // the last, possibly smaller, sub-batch
  double updateSeconds = 0;
  /// Of the update section: gradient clipping's norm and scaling
  /// (CostTable::gradientClipSeconds), before any update starts.
  double clipSeconds = 0;
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

  /// Data-parallel training: the collective stream
  /// (passes/analysis/Collectives.h).
  struct Collective {
    int32_t bucket = 0; // gradientBuckets()' index; -1: the weights' gather
    int32_t round = 0;  // the sub-batch whose gradients it carries
    double start = 0, end = 0; // from the start of the iteration
  };
  std::vector<Collective> collectives;
  double collectiveSeconds = 0; // per iteration: the collective stream busy
  /// What the collectives add to the iteration over compute and copies.
  double exposedCollectiveSeconds = 0;
};

} // namespace memfit

#endif
