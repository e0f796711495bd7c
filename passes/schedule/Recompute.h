//===- Recompute.h - Which forward blocks to drop and recompute -*- C++ -*-===//
//
// Recomputation (mirroring) trades FLOPs for memory with no PCIe traffic. A
// dropped block leaves the device after its last forward use; the scheduler
// re-runs its forward task lazily, just before its first backward use
// (Chen et al. Alg. 2), recomputing dropped inputs first, and schedules,
// places and verifies the re-run like any task.
//
// This pass chooses drop sets for the published policies:
//  - chen-sqrt: Chen et al. Alg. 3 over the forward graph's cut values
//    (articulation points: values every input-to-output path crosses, so a
//    residual or inception block is never split), with the budget search of
//    their appendix.
//  - superneurons: every non-convolution output (BN, activations, pooling,
//    LRN) is dropped; convolution outputs are the checkpoints.
// memfit's own policy decides per block inside the scheduler, weighing the
// recompute time against the stall of a transfer (Schedule.h).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_RECOMPUTE_H
#define MEMFIT_PASSES_RECOMPUTE_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/TaskGraph.h"

#include <vector>

namespace memfit {

/// Blocks of forward outputs that cut the forward graph in `order`: right
/// after their producer runs, they are the only forward value still needed
/// by a later forward task.
std::vector<BlockId> cutBlocks(const TaskGraph &tg,
                               const std::vector<TaskId> &order);

struct ChenSegments {
  std::vector<bool> drop;  // per block: m(v) = 1
  int64_t checkpointBytes; // x: the kept cut values
  int64_t segmentPeak;     // y: the largest segment
};

/// Alg. 3 at sub-batch `subBatch` with segment budget `segmentBudget` bytes.
ChenSegments chenSegments(const TaskGraph &tg, const std::vector<TaskId> &order,
                          int64_t subBatch, int64_t segmentBudget);

/// The appendix's search: B = 0 gives x and y, then B = sqrt(x y) and a
/// six-point grid over [B / sqrt 2, sqrt 2 B]. Distinct drop sets, in order.
std::vector<std::vector<bool>> chenCandidates(const TaskGraph &tg,
                                              const std::vector<TaskId> &order,
                                              int64_t subBatch);

/// SuperNeurons: drop every recomputable block not written by a Conv.
std::vector<bool> superNeuronsDropSet(const TaskGraph &tg);

/// memfit: the recomputable blocks the backward pass needs, cheapest to
/// recompute per byte first (their producer's fastest time at the cost
/// table's sub-batch), until they add up to `bytes`; a block is skipped
/// when dropping it would make some recompute a chain of more than four
/// forward runs. Empty when bytes <= 0.
std::vector<bool> cheapestDropSet(const TaskGraph &tg, const CostTable &costs,
                                  int64_t bytes);

} // namespace memfit

#endif
