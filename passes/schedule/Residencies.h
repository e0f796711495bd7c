//===- Residencies.h - Where each block is, when next used ------*- C++ -*-===//
//
// The scheduler's record of the blocks of one round: for every storage
// block, whether it is on the device (its current residency), on the host,
// or dropped to be recomputed; the instruction that produced its content;
// the steps of the order that use it and which of them comes next; how many
// running tasks pin it. Every residency created is kept, in creation order,
// with the prior uses of its bytes until its first writer has waited for
// them. RoundCursor says where in the order the simulation stands.
//
// Guarantees: a block has at most one current residency; residency ids are
// dense from 0 and become the plan's residencies unchanged; the static
// facts (storage, bytes at the sub-batch, uses) never change after
// construction.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_RESIDENCIES_H
#define MEMFIT_PASSES_RESIDENCIES_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/Plan.h"
#include "passes/schedule/Arena.h"

#include <cassert>
#include <cstdint>
#include <span>
#include <vector>

namespace memfit::sched {

/// Where the simulation stands in the order, and the fastest-time estimate
/// of when a later step can start.
struct RoundCursor {
  int32_t step = 0; // the task being scheduled (index into order)
  /// The first step that is not a forward task; the round's end in an
  /// evaluation round, whose loss is its last use of anything (no block is
  /// dropped there to be recomputed for the loss alone).
  int32_t firstBackward = 0;
  std::vector<double> prefix; // fastest compute time before each step

  RoundCursor(const TaskGraph &tg, const CostTable &costs,
              const std::vector<TaskId> &order);
  int32_t size() const { return static_cast<int32_t>(prefix.size()) - 1; }
  /// Earliest start of step `s` when the current task ends at `now`: the
  /// fastest times of the tasks in between.
  double estimatedStart(int32_t s, double now) const {
    return now + prefix[s] - prefix[step + 1];
  }
};

struct BlockState {
  ResidencyId res = -1;
  bool hasContent = false;
  bool hostValid = false;
  bool usedSinceArrival = true;
  int32_t hostCopy = -1; // the copy-out that made the host copy
  int32_t ready = -1;    // the instruction that put the content in `res`
  size_t nextUse = 0;    // index into the block's uses
  bool everOffloaded = false;
  bool dropped = false; // on neither side: recomputed when needed
  /// Recomputes in progress that will re-run this dropped block's producer
  /// next (siblings of the operand being recomputed now).
  int32_t chainWanted = 0;
};

class Residencies {
public:
  /// Blocks of `tg` at sub-batch `subBatch`, used by the tasks of `order`.
  /// A block homed on the host starts there with its content, as the batch
  /// does; a weight gradient homed there only when `gradientsCarry` (the
  /// sum of the earlier sub-batches' gradients, which this round adds to).
  Residencies(const TaskGraph &tg, const std::vector<TaskId> &order,
              int64_t subBatch, bool gradientsCarry);

  // --- static facts, per block ---
  /// storageOf(), looked up.
  BlockId storageOf(BlockId b) const { return storage[b]; }
  /// TaskGraph::isResident(): outside the arena for the whole run, never
  /// scheduled here.
  bool isResident(BlockId b) const { return resident[b]; }
  /// Homed off the GPU: its content lives on the host between rounds, and
  /// a round that writes it leaves it there.
  bool isHomedOffDevice(BlockId b) const { return homedOff[b]; }
  int64_t bytesOf(BlockId b) const { return bytes[b]; }
  /// recomputableBlocks().
  bool isRecomputable(BlockId b) const { return recomputable[b]; }
  /// A recomputable convolution output (SuperNeurons' checkpoints).
  bool isConvOutput(BlockId b) const { return convOutput[b]; }
  /// The storage blocks step `s` reads, one entry per read (a block read
  /// twice is listed twice), the resident blocks left out.
  std::span<const BlockId> readsAt(int32_t s) const {
    return {stepReads.data() + readStart[s],
            stepReads.data() + readStart[s + 1]};
  }
  /// readsAt() of the step that runs task `t` (a task of the order).
  std::span<const BlockId> readsOfTask(TaskId t) const {
    assert(stepOfTask[t] >= 0 && "a task outside the round's order");
    return readsAt(stepOfTask[t]);
  }
  /// The steps that read or write storage block `b`, ascending.
  std::span<const int32_t> usesOf(BlockId b) const {
    return {useSteps.data() + useStart[b], useSteps.data() + useStart[b + 1]};
  }

  // --- state, per block ---
  BlockState &operator[](BlockId b) { return state[b]; }
  const BlockState &operator[](BlockId b) const { return state[b]; }
  /// The step that uses `b` next, -1 when none.
  int32_t nextUseStep(BlockId b) const {
    size_t k = useStart[b] + state[b].nextUse;
    return k < useStart[b + 1] ? useSteps[k] : -1;
  }
  /// Moves b's next use past `step`.
  void usedUpTo(BlockId b, int32_t step);
  void pin(BlockId b) { ++pins[b]; }
  void unpin(BlockId b) { --pins[b]; }
  bool isPinned(BlockId b) const { return pins[b] > 0; }
  /// On neither side, its content to be made again by a re-run.
  bool isDroppedOut(BlockId b) const {
    return !isResident(b) && state[b].res < 0 && state[b].dropped;
  }

  // --- residencies ---
  /// A new residency of `b` at `offset` (not yet b's current one).
  ResidencyId add(BlockId b, int64_t offset);
  /// The id the next add() returns.
  ResidencyId nextId() const { return static_cast<ResidencyId>(list.size()); }
  const Residency &residency(ResidencyId r) const { return list[r]; }
  BlockId blockOf(ResidencyId r) const { return list[r].block; }
  /// The uses of r's bytes by earlier occupants that its first writer (or
  /// an eviction before it) must wait for.
  StreamUses &pending(ResidencyId r) { return pendingUses[r]; }
  /// Every residency, in creation order; leaves none behind.
  std::vector<Residency> take() { return std::move(list); }

private:
  std::vector<BlockId> storage;
  std::vector<bool> resident, homedOff, recomputable, convOutput;
  std::vector<int64_t> bytes;
  /// usesOf(b) is useSteps[useStart[b], useStart[b + 1]): one array for
  /// every block, not a vector per block (a deep network has hundreds of
  /// thousands of blocks, and every schedule builds these anew).
  std::vector<size_t> useStart;
  std::vector<int32_t> useSteps;
  /// readsAt(s) is stepReads[readStart[s], readStart[s + 1]).
  std::vector<size_t> readStart;
  std::vector<BlockId> stepReads;
  std::vector<int32_t> stepOfTask; // -1 for tasks outside the order
  std::vector<BlockState> state;
  std::vector<int> pins;
  std::vector<Residency> list;
  std::vector<StreamUses> pendingUses;
};

} // namespace memfit::sched

#endif
