//===- Pipeline.h - From task graph and costs to a plan ---------*- C++ -*-===//
//
// The planner's straight-line pipeline: order -> lower bound check -> the
// ideal plan (the yardstick for overhead) -> sub-batch choice -> schedule ->
// verify -> simulate. Every plan it returns has passed the verifier; a plan
// that fails it is an internal error, never written.
//
// overhead = planned time / ideal time - 1, where the ideal time is the
// ideal policy's predicted time on the same cost model and batch, for every
// policy alike.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_PIPELINE_H
#define MEMFIT_PASSES_PIPELINE_H

#include "compiler/ir/Plan.h"
#include "passes/analysis/MemoryLowerBound.h"
#include "passes/analysis/Order.h"
#include "passes/analysis/Simulate.h"
#include "passes/schedule/Schedule.h"
#include "passes/search/Chunk.h"
#include "passes/search/SubBatch.h"
#include "passes/solve/Optimal.h"
#include "passes/solve/TimeBound.h"

#include "llvm/Support/Error.h"

#include <memory>

namespace memfit {

struct PlanRequest {
  Policy policy = Policy::Memfit;
  /// The whole device budget in bytes (unused by Ideal): everything the
  /// trainer allocates once the CUDA context exists, the library reserve
  /// included (docs/memory.md).
  int64_t budget = 0;
  /// When > 0, the plan (weight side + arena) may use this fraction of the
  /// ideal peak, and the device budget is that plus the library reserve.
  double budgetFraction = 0;
  /// The plan may use the lower bound Mmin itself (plus the reserve).
  bool budgetIsLowerBound = false;
  /// Device bytes cuDNN's and cuBLAS's handles and cuBLAS's workspace take
  /// (DeviceSpec::libraryReserveBytes, or --library-reserve): inside the
  /// budget, never in the plan's reach.
  int64_t libraryReserve = 0;
  int64_t batch = 0;
  int64_t forcedSubBatch = 0; // 0: the policy chooses
  /// Gradient accumulation (--accumulate): the batch is this many
  /// micro-batches of forcedSubBatch samples per optimizer step, each
  /// normalized by its own statistics, as PyTorch's accumulation computes
  /// them (subBatchStatistics is then set). 1: none.
  int32_t accumulate = 1;
  /// Allow sub-batches smaller than the batch in a model whose operators
  /// compute statistics over the batch (BatchNorm): each sub-batch is then
  /// normalized by its own statistics, which is not what the model
  /// computes. Off, such a model runs whole batches and its plans are exact.
  bool subBatchStatistics = false;
  OrderKind order = OrderKind::JoinAware;
  /// The order was asked for (--order): the search keeps it. Otherwise it
  /// also tries the other order where a bound says it may win
  /// (otherOrder, docs/passes/search.md).
  bool forcedOrder = false;
  bool inPlace = true; // ScheduleOptions::inPlace, for every plan tried
  /// Prove a lower bound on the iteration time of the plans with the
  /// winner's order and sub-batch (Bound.h).
  bool bound = true;
  /// memfit's refinement phase (a local search over the winner's keep,
  /// recompute and offload decisions, rescheduled move by move).
  bool refine = true;
  /// Where whole batches are needed for exact semantics, memfit may also
  /// split the batch into chunks inside the round (Chunk.h).
  bool chunking = true;
  /// When > 1: plan the batch in exactly this many chunks (it must divide
  /// the batch), for any policy but the ideal.
  int32_t forcedChunks = 0;
  /// > 0: weights may live in pinned host memory, this many bytes at most
  /// (Tiers.h); 0: every weight stays on the GPU, as without tiers.
  int64_t hostBudget = 0;
  /// > 0 (with hostBudget): the optimizer state of weights homed on the
  /// host may live on NVMe, this many bytes at most, where the host budget
  /// would not hold it (Tiers.h); 0: none does.
  int64_t nvmeBudget = 0;
  /// With hostBudget: -1 tries every homing (Tiers.h) and keeps the
  /// fastest; >= 0 tries only those moving at least this many bytes, in
  /// ascending order, and keeps the first that plans (the graph-variant
  /// search passes its first graph's choice to the others).
  int64_t homeBytesAtLeast = -1;
  /// With homeBytesAtLeast: the first graph's homing kept working copies
  /// on the GPU (Tiers.h, keepCopiesOnGpu); this graph then tries that
  /// layout, and every weight on the GPU, too.
  bool homeKeepsCopies = false;
};

/// What `--policy optimal`'s integral program (Optimal.h) found, beside the
/// plan the scheduler made of it.
struct OptimalOutcome {
  /// The program's round time at its solution (one round at the plan's
  /// sub-batch, no input load, no update).
  double objectiveSeconds = 0;
  bool proven = false; // optimal for the program within the node limit
  int64_t nodes = 0;   // branch-and-bound nodes explored
  int maxNodes = 0;    // the node limit
  int candidates = 0, offloaded = 0, recomputed = 0; // blocks
  int rows = 0, columns = 0;
  /// memfit's own plan at the same order and sub-batch (its search picked
  /// the sub-batch).
  double memfitSeconds = 0;
  double solveSeconds = 0; // wall time of the solve (not in any plan)
  /// How the decisions became the plan: 0, offloads leave after their
  /// last forward use; 1, they leave when room is needed; 2, recompute
  /// choices only, memfit's early offload for the rest.
  int realization = 0;
  /// The sub-batches the program was solved at: memfit's, and every other
  /// the search allows whose proven bound is below the plan so far (the
  /// fields above are the kept solve's; solveSeconds is all of them).
  int subBatchesSolved = 1;
};

struct PlanOutcome {
  Plan plan;
  int64_t budget = 0; // the device budget planned for, resolved
  Simulation sim;
  LowerBound lowerBound;
  double idealSeconds = 0;
  int64_t idealPeakBytes = 0; // the ideal plan's resident + arena bytes
  int64_t eq3SubBatch = 0;
  /// The plan computes what the model computes at the batch, up to the
  /// order of float sums; false when sub-batches change batch statistics.
  bool exact = true;
  /// When the plan splits the batch into chunks: the split graph it is a
  /// plan of (the model's TaskGraph otherwise).
  std::shared_ptr<const ChunkedGraph> chunked;
  /// Chunk counts tried and their predicted iteration time.
  std::vector<std::pair<int32_t, double>> chunksTried;
  /// Chunk counts not planned, and the proven bound that ruled each out.
  std::vector<std::pair<int32_t, double>> chunksPruned;
  /// When the plan homes weights on the host (Tiers.h): the model's graph
  /// with those homes.
  std::shared_ptr<const TaskGraph> homed;
  /// The task graph `plan` schedules: the split one, the homed one, or the
  /// model's.
  const TaskGraph &scheduledGraph(const TaskGraph &model) const {
    return chunked ? chunked->tg : homed ? *homed : model;
  }
  /// A proven lower bound on the iteration time of every plan with this
  /// plan's order and sub-batch under its budget; none when not asked for
  /// or not computed (`boundWhy` says why).
  std::optional<IterationBound> bound;
  std::string boundWhy;
  /// A proven lower bound on every plan of this order at any sub-batch the
  /// search allows, when one covers them all (0 otherwise): the least of
  /// each sub-batch's bound.
  double spaceBoundSeconds = 0;
  /// The optimal policy's program, when that policy planned.
  std::optional<OptimalOutcome> optimal;
  double planSeconds = 0; // wall time the pipeline took
  /// Sub-batches tried and their predicted iteration time (infeasible ones
  /// are left out).
  std::vector<std::pair<int64_t, double>> tried;
  /// Schedules given up part-way because they could no longer beat the
  /// fastest so far (ScheduleOptions::cutoffSeconds); not in `tried`.
  int abandoned = 0;
  /// memfit's refinement phase (PipelineRefine.cpp): moves scheduled, and
  /// how many decisions the plan it kept differs in from where it started.
  int64_t refineTries = 0;
  int refineChanged = 0;
  double overhead() const {
    return idealSeconds > 0 ? plan.summary.plannedSeconds / idealSeconds - 1
                            : 0;
  }
};

/// A budget resolved into bytes, the one form every consumer reads (the
/// search, the graph-variant search, memfit compare): the device budget
/// and the library reserve inside it.
struct ResolvedBudget {
  int64_t device = 0;  // everything the trainer allocates on the device
  int64_t reserve = 0; // cuDNN's and cuBLAS's handles and workspace
  /// What the plan (weight side + arena) may use: the one place the
  /// library reserve is taken off.
  int64_t plan() const { return device - reserve; }
};

/// The budget `req` asks for, given the ideal peak and the lower bound
/// (both the plan's own: weight side + arena): its bytes as given; or a
/// fraction of the ideal peak or the lower bound, each plus the library
/// reserve (whatever the policy; planTraining gives the ideal policy its
/// peak plus the reserve). Percentages thus measure the pressure on the
/// plan; the reserve is a fixed cost no plan can save.
ResolvedBudget resolveBudget(const PlanRequest &req, int64_t idealPeakBytes,
                             int64_t lowerBoundBytes);

/// The ideal plan's request that a percentage budget of `req` is of: the
/// ideal policy without a budget, a bound or a forced split into chunks
/// (which the ideal policy refuses: it plans under no budget).
PlanRequest idealYardstick(PlanRequest req);

/// `req` with the budget `b` in bytes in place of what it asked for (a
/// percentage, the lower bound): several plans under the same bytes.
PlanRequest withBudget(PlanRequest req, const ResolvedBudget &b);

/// Errors: a budget under the lower bound (the message prints Mmin and the
/// task that sets it), a budget the policy cannot meet, a verifier failure.
llvm::Expected<PlanOutcome> planTraining(const TaskGraph &tg,
                                         const CostTableFn &tableAt,
                                         const PlanRequest &req);

/// A plan, or why the request has none for the user's reasons (a budget
/// below the floor or one the policy cannot meet, a policy's limits, a
/// flag that cannot apply): what a table of many plans shows in a cell.
struct PlanOrReason {
  std::optional<PlanOutcome> outcome;
  std::string reason; // when there is no outcome
};

/// planTraining for a caller that shows the user's reasons beside other
/// plans (memfit compare). Errors: memfit's own faults alone, never
/// dropped for a reason beside them.
llvm::Expected<PlanOrReason> planOrReason(const TaskGraph &tg,
                                          const CostTableFn &tableAt,
                                          const PlanRequest &req);

} // namespace memfit

#endif
