//===- Plan.h - A static schedule of one training iteration -----*- C++ -*-===//
//
// The Plan is a replayable trace (in the manner of XLA's heap simulator): one
// list of instructions in the order the host issues them, each bound to a
// stream. Streams run their own instructions in order; across streams only
// events order work. Every residency of a block (one stay of its bytes on the
// device) has a fixed offset in one arena, so the program needs no allocator.
//
// One iteration runs `numSubBatches` rounds of `round` (forward, loss,
// backward over one sub-batch, with weight gradients accumulated), then
// `update` once. Rounds start with an empty arena: the data batch and labels
// arrive by host-to-device copies like any prefetched block.
//
// Codegen and the simulator read only this structure; the verifier proves it
// right without trusting the scheduler that wrote it.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_COMPILER_IR_PLAN_H
#define MEMFIT_COMPILER_IR_PLAN_H

#include "compiler/ir/TaskGraph.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace memfit {

enum class Stream : uint8_t { Compute = 0, CopyOut = 1, CopyIn = 2 };
constexpr int kNumStreams = 3;
std::string_view streamName(Stream s);

using ResidencyId = int32_t;
using EventId = int32_t;

/// One stay of a block on the device: `bytes` at `offset` in the arena. It
/// begins with the instruction that first writes it (a task or a copy-in) and
/// ends with the last instruction that touches it; the verifier derives both.
struct Residency {
  BlockId block = -1;
  int64_t offset = 0;
  int64_t bytes = 0;
};

enum class InstrKind : uint8_t {
  Run,     // run a task on the compute stream
  CopyOut, // device-to-host copy of a residency (offload)
  CopyIn,  // host-to-device copy into a residency (prefetch, or input load)
  Record,  // record an event on the stream: it fires when prior work is done
  Wait,    // the stream waits for an event
  /// The copy-out stream waits until the host's update `task`, started in
  /// this round (its Run in `update` has event >= 0), has finished: the
  /// bytes its gradient took in the host's gradient pool are free again.
  WaitHost,
};

struct Instr {
  InstrKind kind;
  Stream stream = Stream::Compute;
  TaskId task = -1;       // Run; WaitHost: the host update waited for
  int32_t algo = 0;       // Run: algorithm id (cost model's numbering)
  bool recompute = false; // Run: a forward task run again to regenerate Y
  /// Run, in the update only: the host's cores run it on the blocks' host
  /// homes (their weight's home is Tier::Host), beside the GPU's updates;
  /// the iteration ends when both are done.
  bool onHost = false;
  int64_t workspaceOffset = 0, workspaceBytes = 0; // Run
  /// Run: the residency of each block in task.reads then task.writes.
  std::vector<ResidencyId> operands;
  ResidencyId residency = -1; // CopyOut/CopyIn
  /// Record/Wait: the event. A Run on the host: -1 to start once the rounds
  /// are over, else the event of the last round after which it may start
  /// (its weight's final gradient is home; passes/schedule/HostOverlap.h).
  EventId event = -1;
};

/// Why a block got the treatment it did (for the report).
enum class BlockDecision : uint8_t { Keep, Offload, Recompute };

struct PlanSummary {
  double idealSeconds = 0;   // the ideal policy's predicted time, same model
  double plannedSeconds = 0; // predicted iteration time of this plan
  double stallSeconds = 0;   // compute stream waiting on copies
  int64_t bytesToHost = 0, bytesToDevice = 0; // per iteration
  int64_t peakArenaBytes = 0;                 // most bytes allocated at once
  int64_t maxLiveBytes = 0; // most bytes live at once (no fragmentation)
  int32_t recomputes = 0;   // forward tasks run again, per round
  int32_t inPlaceRuns = 0;  // tasks writing their output over their input
};

/// The workspace the trainer gives cuBLAS (cublasSetWorkspace) so that it
/// allocates none of its own: the size cuBLAS itself takes on Hopper. Part
/// of the library reserve (Plan::blasWorkspaceBytes).
constexpr int64_t kBlasWorkspaceBytes = int64_t(32) << 20;

struct Plan {
  std::string policy;
  std::string device;
  int64_t batch = 0;
  int64_t subBatch = 0;      // b
  int64_t numSubBatches = 0; // K = ceil(batch / b); the last may be smaller
  /// > 1: the batch runs as this many chunks of `subBatch` inside one round
  /// (TaskGraph::chunks; numSubBatches is then 1).
  int32_t chunks = 1;
  /// The device budget: everything the trainer allocates once the CUDA
  /// context exists (docs/memory.md).
  int64_t budget = 0;
  /// The part of `budget` the libraries keep (cuDNN's and cuBLAS's handles,
  /// cuBLAS's workspace): set aside before planning, never in the arena.
  int64_t libraryReserve = 0;
  int64_t residentBytes = 0; // weights, gradients, optimizer state
  /// Pinned host memory the weight side homed there takes
  /// (TaskGraph::homedBytes(Tier::Host)); 0 without tiers.
  int64_t hostHomeBytes = 0;
  /// NVMe bytes the optimizer state homed there takes
  /// (TaskGraph::homedBytes(Tier::Nvme)); 0 without that tier.
  int64_t nvmeHomeBytes = 0;
  /// The pinned pool the homed gradients stream through
  /// (passes/schedule/GradPool.h; TaskGraph::gradPoolBytes when any
  /// gradient uses it, else 0), and per block the offset of a gradient's
  /// bytes in it (-1, or empty: the gradient has its own host buffer).
  int64_t gradPoolBytes = 0;
  std::vector<int64_t> gradPoolOffset;
  /// Bytes of the gradients that live in the pool instead of their own
  /// buffers (part of hostHomeBytes).
  int64_t pooledGradBytes = 0;
  int64_t arenaBytes = 0; // the one region activations etc. live in
  std::vector<Residency> residencies;
  int32_t numEvents = 0;
  std::vector<Instr> round;             // one sub-batch
  std::vector<Instr> update;            // once per batch, after the rounds
  std::vector<BlockDecision> decisions; // per block
  /// Per block, why the scheduler decided as it did, in words for the
  /// report (e.g. which task found the arena full); empty when the decision
  /// needs no explanation beyond itself. May be empty as a whole.
  std::vector<std::string> decisionWhy;
  PlanSummary summary;

  int64_t totalBytes() const { return residentBytes + arenaBytes; }
  /// Pinned host memory the homes take: each homed tensor's buffer, the
  /// gradients in the pool counted once as the pool.
  int64_t hostMemoryBytes() const {
    return hostHomeBytes - pooledGradBytes + gradPoolBytes;
  }
  /// Where gradient block `b` lives in the gradient pool, or -1.
  int64_t poolOffsetOf(BlockId b) const {
    return b >= 0 && b < (BlockId)gradPoolOffset.size() ? gradPoolOffset[b]
                                                        : -1;
  }
  /// What the plan itself (weight side + arena) may use of the budget.
  int64_t planBudget() const { return budget - libraryReserve; }
  /// The device bytes the trainer is planned to hold: reserve + plan.
  int64_t deviceBytes() const { return libraryReserve + totalBytes(); }
  /// cuBLAS's workspace: out of the reserve, never more than it.
  int64_t blasWorkspaceBytes() const {
    return std::min(kBlasWorkspaceBytes, libraryReserve);
  }
};

/// The residency a Run overwrites in place (its first input's, whose bytes
/// its first output takes over as it starts), or -1 for an ordinary run.
inline ResidencyId inPlaceInput(const TaskGraph &tg, const Plan &plan,
                                const Instr &in) {
  if (in.kind != InstrKind::Run || in.task < 0)
    return -1;
  const Task &t = tg.tasks[in.task];
  if (!t.mayRunInPlace || t.reads.empty() || t.writes.empty() ||
      in.operands.size() <= t.reads.size())
    return -1;
  ResidencyId x = in.operands[t.inPlaceRead], y = in.operands[t.reads.size()];
  if (x < 0 || y < 0 || x == y ||
      plan.residencies[x].offset != plan.residencies[y].offset)
    return -1;
  return x;
}

} // namespace memfit

#endif
