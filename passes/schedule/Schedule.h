//===- Schedule.h - Offload/prefetch event simulation -----------*- C++ -*-===//
//
// moDNN's Algorithm 1 over one static arena: simulates one round task by
// task with a compute stream and two copy streams, gives every residency of
// every block a fixed offset, offloads when an allocation fails (the
// contiguous scheme with the lowest price; defragmentation only when none
// exists), prefetches ahead by Eq. 4, and picks each convolution algorithm by
// the gain of Eq. 5. The policies of vDNN, moDNN and memfit are variations
// of the same simulation (Policy).
//
// Guarantees: the Plan it returns orders every cross-stream dependency with
// an event, never places two live residencies on the same bytes, and fits
// the budget; the verifier checks all of it independently. When the budget
// cannot be met under the policy, it returns an error saying why.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SCHEDULE_H
#define MEMFIT_PASSES_SCHEDULE_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "compiler/support/Diagnostics.h"

#include "llvm/Support/Error.h"

#include <string_view>

namespace memfit {

enum class Policy : uint8_t {
  Ideal,        // no budget: fastest algorithms, liveness only
  VdnnAll,      // vDNN: offload every layer's input, per-layer synchronisation
  VdnnConv,     // vDNN: offload convolution inputs only
  Modnn,        // moDNN as published
  ChenSqrt,     // Chen et al.: drop segment interiors, recompute; no offload
  SuperNeurons, // recompute non-convolution outputs, offload conv outputs
  Memfit,       // the default: joint offload, recompute, sub-batch, algorithms
  Optimal,      // an integral program's keep/recompute/offload (Optimal.h)
};
std::string_view policyName(Policy p);
bool parsePolicy(std::string_view name, Policy &out);

struct ScheduleOptions {
  Policy policy = Policy::Memfit;
  int64_t budget = 0; // total device bytes; ignored by Ideal
  int64_t batch = 0;  // the full batch B
  /// Per block: drop it after its last forward use and recompute it where
  /// the backward pass needs it (Chen et al.'s m(v) = 1). Empty: none.
  std::vector<bool> dropAfterForward = {};
  /// memfit: may evictions drop blocks for recomputation (or only offload)?
  bool allowRecompute = true;
  /// > 0: give up (CutoffError) as soon as the iteration is certain to take
  /// longer than this many seconds. Lets a caller that keeps the fastest of
  /// several schedules abandon the hopeless ones early.
  double cutoffSeconds = 0;
  /// Run elementwise tasks that allow it (Task::mayRunInPlace) over their
  /// input when nothing reads the input afterwards, as Caffe, vDNN and
  /// PyTorch's inplace=True do.
  bool inPlace = true;
  /// Per block: copy it out as soon as a forward task makes it (the device
  /// copy then leaves for free when room is needed, and comes back by
  /// prefetch). Empty: none. The optimal
  /// policy's offload choices.
  std::vector<bool> offloadAfterForward = {};
  /// Per block: the steps (indices into the round's order, ascending)
  /// after which it is copied out, if it has no host copy, and leaves the
  /// device (Eq. 4's prefetch brings it back). Empty: none. The optimal
  /// policy's offload choices.
  std::vector<std::vector<int32_t>> offloadLeaveAfter = {};
  /// Eq. 4's look-ahead past tasks that read nothing to prefetch while the
  /// copy-in stream is idle: true looks on to tasks up to 4 ms of compute
  /// ahead; false (moDNN's look-ahead as memfit has always run it) stops at
  /// the first such task.
  bool lookPastIdle = false;
  /// Per task: run its fastest algorithm, evicting what its workspace
  /// needs whatever Eq. 5's gain says (the zero-workspace one only when no
  /// room can be made). Empty: Eq. 5 decides everywhere. memfit's
  /// refinement phase sets it where a slower algorithm cost time.
  std::vector<bool> fastestAlgo = {};
};

/// schedule() gave up: the plan would be slower than opts.cutoffSeconds.
/// Infeasible at that cutoff, so a search drops it like any other setting
/// that yields no plan.
class CutoffError : public llvm::ErrorInfo<CutoffError, Infeasible> {
public:
  static char ID;
  explicit CutoffError(double atLeast)
      : ErrorInfo(std::string()), atLeast(atLeast) {}
  double atLeast; // a lower bound on the iteration time, seconds
  void log(llvm::raw_ostream &os) const override;
};

/// The bytes of `budget` left to the arena: the budget less the resident
/// weight side (weights, their gradients, the optimizer state homed on the
/// GPU, the collective buffers), which stays outside it. Every step that
/// sizes the arena from a budget asks this one function.
int64_t arenaBytes(const TaskGraph &tg, int64_t budget);

/// The arena a plan without offload or recomputation needs at the cost
/// table's sub-batch: the liveness peak's non-weight bytes plus the largest
/// workspace of a fastest algorithm. Both memfit's early-offload target and
/// its cheapest-recompute drop sets are sized by what this exceeds.
int64_t livenessArenaNeed(const TaskGraph &tg, const std::vector<TaskId> &order,
                          const CostTable &costs, bool inPlace);

/// Schedules one round at the cost table's sub-batch, plus the update.
llvm::Expected<Plan> schedule(const TaskGraph &tg, const CostTable &costs,
                              const std::vector<TaskId> &order,
                              const ScheduleOptions &opts);

} // namespace memfit

#endif
