//===- Scheduler.h - The Algorithm 1 simulator (internal) -------*- C++ -*-===//
//
// The state and steps of the scheduler behind schedule() (Schedule.h),
// shared by its implementation files: Schedule.cpp (the task loop),
// ScheduleMemory.cpp (emission, residencies, eviction, prefetch copies,
// recomputation) and ScheduleDecide.cpp (algorithm choice, look-ahead
// prefetch, early offload, vDNN's rules). Not a public interface.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_SCHEDULER_H
#define MEMFIT_PASSES_SCHEDULER_H

#include "compiler/support/Diagnostics.h"
#include "passes/Arena.h"
#include "passes/Liveness.h"
#include "passes/Schedule.h"

#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <limits>
#include <queue>

namespace memfit::sched {

using Clock = std::array<int32_t, kNumStreams>;
constexpr int32_t kWorkspaceOwner = 1 << 30;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kLookahead = 256; // prefetch look-ahead, in tasks
/// Arenas with more segments than this are searched around kFocusOwners
/// candidates only (Scheduler::searchEviction).
constexpr size_t kExactSearchSegments = 4096;
constexpr size_t kFocusOwners = 64;
/// The longest chain of recomputes one block may need (recompute() recurses
/// once per level).
constexpr int kMaxRecomputeDepth = 1000;

inline int si(Stream s) { return static_cast<int>(s); }

struct Timing {
  double start = 0, end = 0;
  Clock after{}; // what the stream has done once this instruction finished
  EventId recordAfter = -1;
};

struct BlockState {
  ResidencyId res = -1;
  bool hasContent = false;
  bool hostValid = false;
  bool usedSinceArrival = true;
  int32_t hostCopy = -1; // the copy-out that made the host copy
  int32_t ready = -1;    // the instruction that put the content in `res`
  size_t nextUse = 0;    // index into uses[block]
  bool everOffloaded = false;
  bool dropped = false; // on neither side: recomputed when needed
};

/// Why a block first left the device (copied out, or dropped to be
/// recomputed). Recorded as plain data and put into words once the plan is
/// done (Plan::decisionWhy), so planning pays nothing for the report.
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
            const std::vector<TaskId> &order, const ScheduleOptions &opts)
      : tg(tg), costs(costs), order(order), opts(opts),
        arena(opts.policy == Policy::Ideal
                  ? (int64_t(1) << 50)
                  : opts.budget - tg.weightSideBytes()) {}

  llvm::Expected<Plan> run();

private:
  // --- emission ---
  int32_t emit(Instr in, double duration, const std::vector<int32_t> &deps);
  /// Emits a task's run with its operands' residencies, records the uses
  /// and frees its workspace.
  int32_t emitRun(Instr run, double seconds, const std::vector<int32_t> &deps);
  void waitFor(Stream s, int32_t dep, double &earliest);
  std::vector<int32_t> usesToDeps(const StreamUses &u) const;

  // --- memory ---
  int64_t bytesOf(BlockId b) const { return bytes[b]; }
  /// storageOf(), looked up (the scheduler asks for it at every step).
  BlockId storageOfB(BlockId b) const { return storage[b]; }
  ResidencyId newResidency(BlockId b, int64_t offset);
  llvm::Expected<int64_t> allocate(int64_t bytes, int32_t owner,
                                   StreamUses &uses);
  bool evictable(int32_t owner) const;
  /// What evicting `owner` costs, for Arena::findEviction (not usable when
  /// it may not leave).
  Arena::SlotPrice slotPrice(int32_t owner) const;
  Arena::PriceClock priceClock() const;
  /// Arena::findEviction over the whole arena while it holds few segments;
  /// beyond kExactSearchSegments, only around the occupants with the
  /// farthest next use, so deep networks plan in near-linear time.
  std::optional<Arena::Window>
  searchEviction(int64_t bytes,
                 const std::function<Arena::SlotPrice(int32_t)> &price);
  /// Records b's residency under its next use in `farthest`.
  void indexNextUse(BlockId b);
  /// b's key in `farthest`: its next use step, the largest when none.
  int32_t farthestKey(BlockId b) const;
  void evict(ResidencyId r);
  void release(BlockId b);
  void touch(ResidencyId r, Stream s, int32_t instr);
  /// Gives the task's output its input's bytes when the task may run in
  /// place and nothing reads the input afterwards; adds what the task must
  /// wait for to deps.
  bool runInPlace(const Task &task, std::vector<int32_t> &deps);
  llvm::Error prepare(BlockId b, bool needsContent, std::vector<int32_t> &deps);
  int32_t copyIn(BlockId b, ResidencyId r, const StreamUses &uses);
  /// Runs b's forward task again (recomputing its dropped inputs first) and
  /// leaves b resident; adds the run to deps.
  llvm::Error recompute(BlockId b, std::vector<int32_t> &deps, int depth);
  /// Whether evicting b (without a host copy) drops it rather than copying
  /// it out.
  bool shouldDrop(BlockId b) const;
  double recomputeSeconds(BlockId b, int depth) const;
  /// evictable() and shouldDrop()/recomputeSeconds() memoised for one
  /// eviction search (the state does not change within it); newSearch()
  /// starts a fresh one.
  void newSearch() const { ++epoch; }
  bool evictableMemo(int32_t owner) const;
  /// < 0: evicting b copies it out; else the seconds recomputing it costs.
  double dropMemo(BlockId b) const;
  void dropForwardDone(TaskId t);

  // --- the report's why ---
  void noteOffload(BlockId b) {
    if (!st[b].everOffloaded)
      offloadCause[b] = cause;
  }
  void noteDrop(BlockId b, const LeaveCause &c) {
    if (dropCause[b].kind == LeaveCause::None)
      dropCause[b] = c;
  }
  std::string describe(const LeaveCause &c) const;
  void explainDecisions();

  // --- decisions ---
  int32_t chooseAlgo(TaskId t);
  void prefetchAhead(double taskEnd);
  void offloadAhead(TaskId t);
  void vdnnPrefetch(TaskId t);
  bool isVdnn() const {
    return opts.policy == Policy::VdnnAll || opts.policy == Policy::VdnnConv;
  }
  double est(int32_t s, double now) const {
    return now + prefix[s] - prefix[step + 1];
  }
  int32_t nextUseStep(BlockId b) const {
    const BlockState &bs = st[b];
    return bs.nextUse < uses[b].size() ? uses[b][bs.nextUse] : -1;
  }

  llvm::Error fail(const llvm::Twine &why) const {
    return makeErrorF("policy {0} cannot meet the budget at sub-batch {1}: {2}",
                      policyName(opts.policy), b_, why.str());
  }

  const TaskGraph &tg;
  const CostTable &costs;
  const std::vector<TaskId> &order;
  ScheduleOptions opts;
  int64_t b_ = 1;
  Plan plan;
  Arena arena;
  std::vector<Instr> instrs;
  std::vector<Timing> timing;
  std::array<double, kNumStreams> streamFree{};
  std::array<Clock, kNumStreams> clk{};
  std::array<int32_t, kNumStreams> lastOn{-1, -1, -1};
  EventId numEvents = 0;

  // Per block, computed once: its storage block, whether it is on the
  // weight side, its bytes at the sub-batch.
  std::vector<BlockId> storage;
  std::vector<bool> weightSide;
  std::vector<int64_t> bytes;
  std::vector<BlockState> st;
  std::vector<std::vector<int32_t>> uses; // per storage block: steps
  std::vector<StreamUses> pending;        // per residency: bytes' prior uses
  std::vector<int> pinned;                // > 0: a running task needs it
  /// Residencies by their block's next use step (no next use: largest),
  /// farthest on top; entries go stale when the block moves or advances and
  /// are dropped when met.
  std::priority_queue<std::pair<int32_t, ResidencyId>> farthest;
  std::vector<uint64_t> focusSeen; // per residency: the search that took it
  uint64_t focusSearch = 0;
  mutable uint64_t epoch = 1;
  mutable std::vector<std::pair<uint64_t, bool>> evictCache;  // per residency
  mutable std::vector<std::pair<uint64_t, double>> dropCache; // per block
  std::vector<bool> droppable;    // recomputableBlocks()
  std::vector<bool> isConvOutput; // SuperNeurons' checkpoints
  std::vector<double> prefix;     // fastest compute time before step
  int32_t step = 0;
  int32_t firstBackward = 0;
  int64_t offloadTarget = 0, offloadedAhead = 0;
  // vDNN's synchronisation: copies the next task waits for, and prefetches
  // the next layer's backward waits for.
  std::vector<int32_t> syncNext, syncLayer;
  std::vector<bool> vdnnOffloaded, vdnnPrefetched; // per op
  // The reason for the evictions being made now, and per block the reason
  // of its first offload and of its first drop.
  LeaveCause cause;
  std::vector<LeaveCause> offloadCause, dropCause;
};

} // namespace memfit::sched

#endif
