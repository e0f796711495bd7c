//===- PolicyRules.h - A scheduling policy as a table of rules --*- C++ -*-===//
//
// What distinguishes the policies inside one schedule (Schedule.h), as data:
// which algorithm a task runs, who may leave the arena and how, which copies
// are started ahead. rulesFor() builds the table once per schedule, the only
// place that maps a Policy to behaviour, and the scheduler consults the
// rules instead of asking which policy it runs.
//
// Guarantees: rulesFor() is total over Policy and pure; the scheduler's
// behaviour depends on the policy only through these rules (and the
// policy's name in messages).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_POLICYRULES_H
#define MEMFIT_PASSES_POLICYRULES_H

#include "passes/schedule/Schedule.h"

#include <cstdint>

namespace memfit::sched {

struct PolicyRules {
  /// No budget: the arena is unbounded, nothing is refused, and the plan's
  /// budget is what it uses (the ideal policy).
  bool unbounded = false;

  enum class AlgoChoice : uint8_t {
    Fastest,         // always the fastest algorithm
    FastestThatFits, // vDNN: the fastest whose workspace fits, else baseline
    Eq5Gain,         // moDNN Eq. 5: the largest gain after Toff and Tpre
  } algo = AlgoChoice::Eq5Gain;

  /// vDNN's fixed rule: a layer's data inputs are copied out during its
  /// forward and released after it, with per-layer synchronisation and
  /// findPrefetchLayer in the backward pass.
  enum class LayerOffload : uint8_t {
    None,
    AllLayers,  // vdnn-all
    ConvLayers, // vdnn-conv
  } layerOffload = LayerOffload::None;

  /// Blocks may be evicted when an allocation fails (else the budget is
  /// refused there, without moDNN's defragmentation).
  bool evicts = true;
  /// Only blocks that can be recomputed, or already have a host copy, may
  /// leave: nothing non-recomputable is copied out to make room.
  bool evictsRecomputableOrCopiedOnly = false;
  /// moDNN's criterion: a block the next task uses may not leave.
  bool keepsNextTaskBlocks = false;
  /// An eviction's price includes the part of its prefetch that cannot
  /// hide before the next use.
  bool pricesLatePrefetch = false;

  /// Whether a recomputable block without a host copy is dropped when it
  /// leaves (instead of copied out).
  enum class Drop : uint8_t {
    Never,
    Always,      // chen-sqrt
    NonConv,     // superneurons: convolution outputs are checkpoints
    WhenCheaper, // memfit: when recomputing costs less than moving it
  } drop = Drop::Never;

  /// Eq. 4's look-ahead prefetch after every task.
  bool prefetchesAhead = true;
  /// memfit's early offload of blocks with a long reuse distance.
  bool offloadsEarly = false;
};

/// The rules of policy `p`.
PolicyRules rulesFor(Policy p);

} // namespace memfit::sched

#endif
