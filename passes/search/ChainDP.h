//===- ChainDP.h - Keep, recompute or offload along a chain -*- C++ -*-===//
//
// A dynamic program over the forward pass cut into a chain of segments, in
// the spirit of Rotor (Beaumont et al., "Optimal checkpointing for
// heterogeneous chains") and Rockmate (Zhao et al., ICML 2023): exact
// inside each segment, a recurrence over the chain between them.
//
// A segment ends at a forward op after which nothing made earlier is read
// again by the forward pass (an articulation point of the forward graph: a
// residual block's closing add, a DenseNet transition). The op's outputs are
// the segment's boundary. Inside a segment every subset of the droppable
// blocks (recomputable forward outputs the backward pass needs, not the
// boundary) is priced exactly when there are at most maxExactBlocks of them,
// else the non-convolution outputs and 33 prefixes of them ordered by their
// producer's time per byte; each subset with three offload choices (none, the
// boundary, every kept block). An option costs the re-runs it implies (the
// dropped blocks' producers and, transitively, the producers of their inputs
// that are gone by the backward pass) and holds the bytes it keeps from its
// forward to its backward.
//
// Between segments, Rotor's choice of the next checkpoint: a range of up to
// maxSpan segments may be re-run as a whole from the boundary before it
// (everything recomputable in it dropped, its own boundary kept or copied
// out). With memory discretized into levels of the arena, D[c][m][v] the
// least re-run time of the segments before c holding m levels across:
//   D[c+1][m + hold(r)][v + off(r)] =
//       min over ranges r = [a, c] (a single segment with its exact
//       options, or a span) of D[a][m][v] + rerun(r) + penalty * off(r),
// allowed when m + need(r) fits the arena, need(r) being the most a step
// of the range has live beyond what earlier segments hold across it (from
// the liveness profile and the fastest algorithms' workspaces; a span's
// blocks all come back when its backward pass starts). v counts the bytes
// offloaded so far against a guessed total V: an offload in segment c is
// allowed only when what is still to be copied (at most V - v) fits the
// forward time after c on the copy-out stream and the backward time before
// c's on the copy-in stream, so it hides. Four totals V are tried; the
// cheapest wins. O(segments x maxSpan x levels x offload levels x
// options), no time limits, ties to the first option and the lowest
// state: the same inputs give the same decisions.
//
// Guarantees: the decisions are in the scheduler's form (the drop set and
// the blocks copied out once the forward pass is done with them,
// ScheduleOptions); the scheduler, the verifier and the simulation treat
// them like any other. The program's memory model is an estimate (no
// fragmentation, prefetch room, re-runs' transient inputs): the scheduler
// evicts what the decisions leave over, and memfit keeps the result only
// when strictly faster. Recompute here is Chen et al.'s (each dropped block
// made once more, just before the backward pass needs it), which is what
// the scheduler runs; Rotor's nested re-runs of a segment are not in the
// space.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_CHAINDP_H
#define MEMFIT_PASSES_CHAINDP_H

#include "compiler/ir/CostTable.h"
#include "compiler/ir/TaskGraph.h"

#include <functional>
#include <optional>
#include <vector>

namespace memfit {

struct ChainSegments {
  std::vector<int32_t> ofOp; // per op: its segment; -1 without forward task
  std::vector<OpId> ends;    // per segment: its last op (its boundary's)
  int32_t count = 0;
};

/// The forward pass in `order` cut into segments at its articulation ops
/// (works on graphs split along the batch: chunks of one op are one op).
ChainSegments chainSegments(const TaskGraph &tg,
                            const std::vector<TaskId> &order);

struct ChainOptions {
  /// Plan to this share of the arena (leaves room for what the model does
  /// not see: fragmentation, workspaces, prefetches).
  double arenaFraction = 1.0;
  bool offload = true;
  int memoryLevels = 256;
  int volumeLevels = 8; // of the offloaded bytes
  int maxExactBlocks = 10;
  /// The most segments one range re-runs as a whole from the boundary
  /// before it (Rotor's choice of the next checkpoint, bounded).
  int maxSpan = 8;
  bool inPlace = true;
};

struct ChainDecisions {
  std::vector<bool> drop;    // per block: ScheduleOptions::dropAfterForward
  std::vector<bool> offload; // per block: ScheduleOptions::offloadAfterForward
  int32_t segments = 0;
  double rerunSeconds = 0; // the model's re-run time per round
  int64_t offloadBytes = 0;
  int32_t checkpoints = 0; // ranges chosen (each ends at a kept boundary)
};

/// One solve of a chain built once: the arena's share it plans to and
/// whether it may copy out (ChainOptions' fields of the same names).
struct ChainTry {
  double arenaFraction = 1.0;
  bool offload = true;
};
/// Runs work(0) .. work(n - 1), in any order and on any threads.
using SideBySide =
    std::function<void(size_t, const std::function<void(size_t)> &)>;

/// solveChain per try, the chain (segments, options, peaks) built once from
/// `opts` for all of them (its arenaFraction and offload unused); the same
/// decisions as solveChain with each try's fields in `opts`.
std::vector<std::optional<ChainDecisions>>
solveChainTries(const TaskGraph &tg, const std::vector<TaskId> &order,
                const CostTable &costs, int64_t arenaBytes,
                const ChainOptions &opts, const std::vector<ChainTry> &tries,
                const SideBySide &sideBySide);

/// Solves the chain for one round in `order` at the cost table's sub-batch
/// under `arenaBytes` (the budget less the resident weight side). None when
/// the forward pass has no droppable or offloadable block.
std::optional<ChainDecisions> solveChain(const TaskGraph &tg,
                                         const std::vector<TaskId> &order,
                                         const CostTable &costs,
                                         int64_t arenaBytes,
                                         const ChainOptions &opts);

} // namespace memfit

#endif
