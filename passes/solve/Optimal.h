//===- Optimal.h - Keep, recompute or offload, as a MILP --------*- C++ -*-===//
//
// `--policy optimal`: decides, for every block that lives from the forward
// pass into the backward pass, whether it stays on the device, is copied
// out after it is made and back before its first backward use, or is
// dropped after its last forward use and made again by re-running its
// forward task -- as a mixed-integer program in the spirit of Checkmate
// (Jain et al., MLSys 2020) and POET (Patil et al., ICML 2022), solved by
// CBC's branch and bound with a node limit (no time limit: the same inputs
// give the same decisions). The scheduler (Schedule.h) then turns the
// decisions into a plan: the recompute choices as the drop set, the
// offload choices as forced offloads.
//
// The program, over the steps of the round's order (its columns: per
// candidate block keep / offload / recompute, per forward task a re-run,
// per step whose fastest algorithm's workspace may not fit a choice of the
// zero-workspace one, per step its start S[t]):
//
//  - memory, per step: the live bytes less the absent ones, plus the
//    workspace of the algorithm chosen, fit the arena. A recomputed block
//    is absent from after its last forward use to its first backward use;
//    an offloaded one only once its copy out is done (started when it is
//    made) and until its copy back must start;
//  - a block recomputed has its producer re-run, once, at its fastest
//    algorithm, just before the block's first backward use; a producer's
//    input dead by then is made again too (its producer re-runs), and one
//    absent then and recomputed as well makes its producer re-run;
//  - the compute stream: S[t+1] >= S[t] + t's time (its zero-workspace
//    algorithm's where chosen) + the re-runs made for t+1;
//  - copies out, one stream from the round's start: t starts after the
//    blocks offloaded and absent at t are on the host; copies back, one
//    stream from the backward pass's start: step u starts after every
//    offloaded block first used by u is back;
//  - minimize the round's end.
//
// Guarantees: the decisions satisfy the program's memory rows (so the
// scheduler has to add evictions only for fragmentation, workspaces and
// re-runs' transient inputs); `proven` is true only when CBC proved the
// incumbent optimal for the program within the node limit. The program's
// objective is a model, not a prediction: it leaves out copy latencies,
// event waits and the order copies share one stream, so the plan's
// simulated time can differ from it either way. The proven lower bound on
// the space is TimeBound.h's, computed on the plan like on every plan.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_OPTIMAL_H
#define MEMFIT_PASSES_OPTIMAL_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/TaskGraph.h"

#include "llvm/Support/Error.h"

#include <vector>

namespace memfit {

struct OptimalOptions {
  /// Branch-and-bound nodes CBC may explore; the best integral solution
  /// found by then is used (a node count, not a time, so the answer does
  /// not depend on the machine).
  int maxNodes = 500;
  /// Rounds of more tasks than this are refused: the program grows with
  /// steps times blocks, and beyond a few hundred tasks branch and bound
  /// rarely proves anything within the node limit (ResNet-50's 457 take
  /// about 4 s and end unproven; ResNet-18 in two chunks, 418, 0.5 s).
  size_t maxTasks = 600;
  bool inPlace = true; // the liveness the memory rows use
};

struct OptimalDecisions {
  std::vector<bool> drop;    // per block: recompute it (the drop set)
  std::vector<bool> offload; // per block: offloaded into the backward pass
  /// Per block: the steps after which it is offloaded and leaves (the
  /// gaps the program chose, in order).
  std::vector<std::vector<int32_t>> leaveAfter;
  double objectiveSeconds = 0; // the program's round time at its solution
  bool proven = false;         // CBC proved the solution optimal
  int64_t nodes = 0;           // branch-and-bound nodes explored
  int candidates = 0;          // blocks decided
  int rows = 0, columns = 0;   // the program's size
};

/// Solves the program for one round in `order` (forward and backward tasks,
/// no update) at the cost table's sub-batch under `arenaBytes` (the budget
/// less the resident weight side). Errors: a round larger than
/// opts.maxTasks, a budget no per-block choice meets, no integral solution
/// within the node limit.
llvm::Expected<OptimalDecisions> solveOptimal(const TaskGraph &tg,
                                              const std::vector<TaskId> &order,
                                              const CostTable &costs,
                                              int64_t arenaBytes,
                                              const OptimalOptions &opts);

} // namespace memfit

#endif
