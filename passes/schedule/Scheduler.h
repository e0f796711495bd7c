//===- Scheduler.h - The Algorithm 1 simulator (internal) -------*- C++ -*-===//
//
// The scheduler behind schedule() (Schedule.h). It composes the parts that
// own the simulation's state -- the streams' timeline (StreamTimeline), the
// arena's segments (Arena), the blocks' residencies (Residencies) and the
// eviction pricing (EvictionPricer) -- under a policy's rules (PolicyRules),
// and keeps only what ties them together: the plan being built, vDNN's
// per-layer synchronisation, memfit's early-offload budget and why each
// block moved. Its implementation files: Schedule.cpp (the task loop),
// ScheduleMemory.cpp (emission, residencies, eviction, copies,
// recomputation), ScheduleLookahead.cpp (algorithm choice, look-ahead
// prefetch, early offload, vDNN's prefetch) and ScheduleWhy.cpp (the
// report's reasons). Not a public interface.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SCHEDULER_H
#define MEMFIT_PASSES_SCHEDULER_H

#include "compiler/support/Diagnostics.h"
#include "passes/analysis/Liveness.h"
#include "passes/schedule/Arena.h"
#include "passes/schedule/EvictionPricer.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/schedule/Residencies.h"
#include "passes/schedule/Schedule.h"
#include "passes/schedule/StreamTimeline.h"

#include "llvm/Support/FormatVariadic.h"

#include <limits>

namespace memfit::sched {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kLookahead = 256; // prefetch look-ahead, in tasks
/// The most dropped blocks prefetchAhead walks back through for one task,
/// looking for the host copies their recomputes read.
constexpr size_t kPrefetchChainBlocks = 64;
/// ScheduleOptions::lookPastIdle looks past at most this many tasks that
/// need nothing (besides its 4 ms).
constexpr int32_t kLookPastIdleTasks = 64;
/// The longest chain of recomputes one block may need (recompute() recurses
/// once per level).
constexpr int kMaxRecomputeDepth = 1000;

/// Why a block first left the device (copied out, or dropped to be
/// recomputed). Recorded as plain data and put into words once the plan is
/// done (Plan::decisionWhy), so planning pays nothing for the report.
/// No window of the arena holds an allocation although enough bytes are
/// free: the caller defragments (evicting pinned blocks too) and tries once
/// more. Never leaves the scheduler.
class Fragmented : public llvm::ErrorInfo<Fragmented> {
public:
  static char ID;
  void log(llvm::raw_ostream &os) const override {
    os << "the arena is too fragmented";
  }
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }
};

struct LeaveCause {
  enum Kind : uint8_t {
    None,
    ArenaFull,  // no room for a block the current task needs
    Workspace,  // no room for the current task's workspace
    Defragment, // moDNN's defragmentation: everything unpinned leaves
    Prefetch,   // room made for a prefetch ahead of a later task
    Early,      // memfit's early offload of a block with a long reuse distance
    Vdnn,       // vDNN's fixed rule: a layer's input during its forward
    DropSet,    // the policy's drop set: leaves after its last forward use
    Released,   // left after its last direct use, needed by a recompute
    Solver,     // the optimal policy's program chose to offload it
  } kind = None;
  int32_t step = -1;     // the task being scheduled (index into the order)
  BlockId need = -1;     // ArenaFull, Prefetch: the block that needed room
  int32_t nextStep = -1; // Early: the next use; Prefetch: the task served
  int64_t bytes = 0;     // the bytes that needed room
  double gapSeconds = 0; // Early: estimated time until the next use
};

class Scheduler {
public:
  Scheduler(const TaskGraph &tg, const CostTable &costs,
            const std::vector<TaskId> &order, const ScheduleOptions &opts);

  llvm::Expected<Plan> run();

private:
  // --- the task loop (Schedule.cpp) ---
  /// moDNN Eq. 1: every task fits alone.
  llvm::Error checkEachTaskFits() const;
  /// memfit: the bytes to offload early, as many as the liveness peak
  /// exceeds the arena (less a drop set's), plus a quarter.
  int64_t earlyOffloadTarget() const;
  llvm::Error scheduleStep();
  /// Makes room for the task's operands and loads or recomputes their
  /// content; defragments fully when the arena is too fragmented.
  llvm::Error prepareTask(const Task &task, std::vector<int32_t> &deps);
  llvm::Error prepareOperands(const Task &task, std::vector<int32_t> &deps);
  /// The task's algorithm (Eq. 5), with its workspace placed; the baseline
  /// when the workspace finds no room.
  const AlgoCost &placeAlgorithm(TaskId t, Instr &run,
                                 std::vector<int32_t> &deps);
  /// vDNN: what the task waits for (the previous task's copies and, at the
  /// start of a layer's backward, the prefetch issued for it).
  std::vector<int32_t> layerSyncDeps(TaskId t);
  /// vDNN: copies out a forward layer's inputs at their last forward
  /// consumer; returns those to release once the layer has run.
  std::vector<BlockId> offloadLayerInputs(const Task &task);
  /// After the task's run `i`: content, next uses, releases, and the
  /// copies started ahead.
  void finishStep(TaskId t, int32_t i, const std::vector<BlockId> &touched,
                  const std::vector<BlockId> &layerInputs);
  /// Joins the streams and completes the plan.
  void finishRound();

  // --- emission and memory (ScheduleMemory.cpp) ---
  /// Emits a task's run with its operands' residencies, records the uses
  /// and frees its workspace.
  int32_t emitRun(Instr run, double seconds, const std::vector<int32_t> &deps);
  /// Appends to `deps` the instructions of the last uses `u` records.
  static void addUseDeps(const StreamUses &u, std::vector<int32_t> &deps);
  /// Places `bytes` for `owner`, evicting the cheapest window when no free
  /// run is large enough. `found`, when given, is that window, searched
  /// for in this same state (chooseAlgo's), so it is not searched again.
  llvm::Expected<int64_t> allocate(int64_t bytes, int32_t owner,
                                   StreamUses &uses,
                                   std::optional<Arena::Window> found = {});
  /// The one copy-out path: copies residency `r` to the host once its
  /// content is ready and its bytes' pending uses are done; its block then
  /// has a valid host copy. Returns the copy.
  int32_t copyOut(ResidencyId r);
  void evict(ResidencyId r);
  void release(BlockId b);
  void touch(ResidencyId r, Stream s, int32_t instr);
  /// Gives the task's output its input's bytes when the task may run in
  /// place and nothing reads the input afterwards; adds what the task must
  /// wait for to deps.
  bool runInPlace(const Task &task, std::vector<int32_t> &deps);
  /// The same for a re-run of `producer` writing y: its input's bytes when
  /// nothing reads the input again.
  bool recomputeInPlace(TaskId producer, BlockId y, std::vector<int32_t> &deps);
  /// Gives y the bytes of resident x, with what y must wait for.
  void handOver(BlockId x, BlockId y, std::vector<int32_t> &deps);
  llvm::Error prepare(BlockId b, bool needsContent, std::vector<int32_t> &deps);
  int32_t copyIn(BlockId b, ResidencyId r, const StreamUses &uses);
  /// Whether a recompute still to come may read b: a forward reader of b
  /// writes a block that is dropped and has a use ahead or is an operand
  /// of a recompute in progress. `except`: a
  /// reader not counted (the re-run asking).
  bool feedsPendingRecompute(BlockId b, TaskId except = -1) const;
  /// Whether dropped block y is, or leads through dropped blocks to, an
  /// operand that a recompute in progress has still to re-run.
  bool feedsChain(BlockId y) const;
  /// Runs b's forward task again (recomputing its dropped inputs first) and
  /// leaves b resident; adds the run to deps.
  llvm::Error recompute(BlockId b, std::vector<int32_t> &deps, int depth);
  llvm::Error prepareRecomputeOperands(TaskId producer,
                                       std::vector<int32_t> &deps, int depth);
  void dropForwardDone(TaskId t);
  /// ScheduleOptions::offloadAfterForward: copies out the blocks forward
  /// task t made that are marked.
  void offloadForced(TaskId t);
  /// ScheduleOptions::offloadLeaveAfter: the blocks of this step that leave
  /// after it.
  void leaveAfterStep(const std::vector<BlockId> &touched);

  // --- decisions ahead (ScheduleLookahead.cpp) ---
  /// Eq. 5's algorithm for task t; `room` gets the eviction window its
  /// workspace needs, when it does not fit as things are.
  int32_t chooseAlgo(TaskId t, std::optional<Arena::Window> &room);
  /// Eq. 4: prefetches for the tasks ahead that need blocks on the host.
  void prefetchAhead(double taskEnd);
  /// Prefetches the blocks of `need` for step `s`; false when one finds no
  /// room.
  bool prefetchFor(int32_t s, const std::vector<BlockId> &need);
  void offloadAhead(TaskId t);
  void vdnnPrefetch(TaskId t);

  // --- the report's why (ScheduleWhy.cpp) ---
  void noteOffload(BlockId b) {
    if (!blocks[b].everOffloaded)
      offloadCause[b] = cause;
  }
  void noteDrop(BlockId b, const LeaveCause &c) {
    if (dropCause[b].kind == LeaveCause::None)
      dropCause[b] = c;
  }
  std::string describe(const LeaveCause &c) const;
  void explainDecisions();

  llvm::Error fail(const llvm::Twine &why) const {
    return makeInfeasibleF(
        "policy {0} cannot meet the budget at sub-batch {1}: {2}",
        policyName(opts.policy), subBatch_, why.str());
  }

  const TaskGraph &tg;
  const CostTable &costs;
  const std::vector<TaskId> &order;
  const ScheduleOptions opts;
  const PolicyRules rules;
  const int64_t subBatch_;
  Plan plan;

  // The parts that own the simulation's state.
  Arena arena;
  StreamTimeline timeline;
  RoundCursor cursor;
  Residencies blocks;
  EvictionPricer pricer;

  /// memfit's early offload: the bytes to copy out ahead, and those so far.
  int64_t offloadTarget = 0, offloadedAhead = 0;
  /// vDNN's synchronisation: copies the next task waits for, prefetches
  /// the next layer's backward waits for, and per op what happened.
  struct LayerSync {
    std::vector<int32_t> nextTask, nextLayer;
    std::vector<bool> offloaded, prefetched, backwardSeen;
  } layerSync;
  /// The reason for the evictions being made now, and per block the reason
  /// of its first offload and of its first drop.
  LeaveCause cause;
  std::vector<LeaveCause> offloadCause, dropCause;
  /// prefetchAhead's scratch: the blocks one task needs, the dropped blocks
  /// still to walk, and which were walked (by stamp).
  std::vector<BlockId> prefetchNeed, prefetchStack;
  std::vector<uint64_t> walkSeen;
  uint64_t walkStamp = 0;
  /// The operands that recomputes in progress still have to re-run
  /// (BlockState::chainWanted summed), and feedsChain's scratch.
  int32_t chainWants = 0;
  mutable std::vector<BlockId> chainStack;
  mutable std::vector<uint64_t> chainSeen;
  mutable uint64_t chainStamp = 0;
};

} // namespace memfit::sched

#endif
