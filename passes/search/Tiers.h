//===- Tiers.h - Where each weight lives: GPU or host memory ----*- C++ -*-===//
//
// The memory tiers (docs/memory.md, "Memory tiers"): a weight's blocks (its
// fp32 weight, 16-bit working copy, gradient and optimizer state) live on
// the GPU for the whole run, or in pinned host memory, from where each
// round copies the weight in for the tasks that read it and its gradient
// out once final, and the host's cores run its update. A weight is the
// unit: its blocks share one home, except that with an NVMe budget what
// only the host's update touches (the optimizer state, and in 16-bit plans
// the fp32 master behind the working copy the GPU reads) may live on NVMe,
// where the host budget would not hold it; the host's update then streams
// it from the drive and back. Where that is not enough either, the homed
// gradients stream through one pinned pool of what the budget leaves
// (passes/schedule/GradPool.h).
//
// planAcrossTiers plans a graph with the weights homed where the request's
// budgets allow and keeps the fastest plan. Guarantees: the plan with
// every weight on the GPU is among those tried whenever it is feasible, so
// allowing the host tier never gives a slower plan; no plan's pinned host
// memory (Plan::hostMemoryBytes, offload slots, batch buffers) exceeds the
// host budget, nor its NVMe bytes the NVMe budget; a homing puts state on
// NVMe, or gradients through a pool, only where the host budget cannot
// hold them; the graph of the plan returned carries its homes
// (PlanOutcome::scheduledGraph).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SEARCH_TIERS_H
#define MEMFIT_PASSES_SEARCH_TIERS_H

#include "passes/search/Pipeline.h"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace memfit {

/// One weight's blocks and their bytes: the unit a home is chosen for.
struct WeightBlocks {
  BlockId weight = -1;
  std::vector<BlockId> blocks;
  int64_t bytes = 0;
};

/// The weights whose blocks may live on the host, largest first (ties in
/// block order): every weight no task of a round writes. BatchNorm's
/// running statistics, which its forward updates, stay on the GPU.
std::vector<WeightBlocks> homeableWeights(const TaskGraph &tg);

/// Homes for `tg` with the first weights of `ws` on the host, as many as it
/// takes to move at least `bytes` off the GPU (all of them at most).
std::vector<Tier> homesMoving(const TaskGraph &tg,
                              std::span<const WeightBlocks> ws, int64_t bytes);

/// Keeps on the GPU every 16-bit working copy that `homes` homes off it,
/// the rest of its weight staying where it is (TaskGraph::copyStaysOnGpu:
/// ZeRO-Offload's layout). Returns the bytes kept.
int64_t keepCopiesOnGpu(const TaskGraph &tg, std::vector<Tier> &homes);

/// Whether `tg` keeps any working copy on the GPU whose weight is homed
/// off it.
bool keepsCopiesOnGpu(const TaskGraph &tg);

/// Moves what may live on NVMe (TaskGraph::nvmeHomeable) of weights homed
/// on the host (`homes`) there, the largest weights first, until at least
/// `bytes` have moved (or all of it): the optimizer state of every such
/// weight before any 16-bit plan's fp32 master. Returns the bytes moved.
int64_t spillStateToNvme(const TaskGraph &tg, std::span<const WeightBlocks> ws,
                         std::vector<Tier> &homes, int64_t bytes);

/// How planTraining plans one graph with its homes fixed.
using PlanOneGraph = std::function<llvm::Expected<PlanOutcome>(
    const TaskGraph &, const CostTableFn &, const PlanRequest &)>;

/// The search over homes (`req.hostBudget` > 0). Errors: a request the
/// host tier cannot serve (data parallelism, forced chunks, the optimal
/// policy, a device that states no host optimizer rate), no feasible plan
/// (the reason of the plan that homes the most on the host), or any
/// non-Infeasible error of a plan.
llvm::Expected<PlanOutcome> planAcrossTiers(const TaskGraph &tg,
                                            const CostTableFn &tableAt,
                                            const PlanRequest &req,
                                            const PlanOneGraph &planOne);

} // namespace memfit

#endif
