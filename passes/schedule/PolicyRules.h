//===- PolicyRules.h - The policy table --------------------------*- C++
//-*-===//
//
// Every policy as one entry of a table, as operators are in compiler/ops:
// its name, its rules inside one schedule (which algorithm a task runs, who
// may leave the arena and how, which copies start ahead), the candidates
// the search makes for it first, and which of the search's phases run for
// it (passes/search, docs/passes/search.md). The scheduler consults the
// rules instead of asking which policy it runs, and the search the rest.
//
// Guarantees: the table has exactly one entry per Policy, in the enum's
// order, with distinct names; policyDef() and rulesFor() are total over
// Policy and pure; the scheduler's and the search's behaviour depend on the
// policy only through its entry (and its name in messages and plans).
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_POLICYRULES_H
#define MEMFIT_PASSES_POLICYRULES_H

#include "passes/schedule/Schedule.h"

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memfit {
namespace sched {

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

} // namespace sched

/// The candidates the search schedules first for a policy; each kind is one
/// generator of passes/search/PipelineCandidates.cpp.
enum class FirstCandidates : uint8_t {
  WholeBatch,   // the whole batch (or the sub-batch forced), as it is
  ChenSegments, // Chen et al.'s segment drop sets at the whole batch
  SuperNeurons, // SuperNeurons' drop set at the whole batch
  Eq3,          // moDNN's Eq. 3 sub-batch, evictions offload only
  Joint,        // memfit's joint search over sub-batches and drop sets
};

/// Which of the search's phases run for a policy beyond its first
/// candidates (docs/passes/search.md).
struct PolicyPhases {
  /// Chen et al.'s segment drop sets and the chain program's decisions,
  /// after the first candidates of whole rounds.
  bool chenAndChain = false;
  /// The integral program's decisions inside the search, the bound-guided
  /// phase and the refinement, on the whole-round plan and on the fastest
  /// in chunks.
  bool polish = false;
  /// The batch in chunks inside the round, where the model needs whole
  /// batches to stay exact.
  bool chunks = false;
  /// The integral program at the search's order and sub-batch makes the
  /// plan.
  bool optimal = false;
};

struct PolicyDef {
  Policy policy;
  std::string_view name; // --policy, and the plan's policy
  /// In `memfit compare`'s default columns (the optimal policy is not: it
  /// runs the integral program, minutes on large models).
  bool comparedByDefault = false;
  sched::PolicyRules rules;
  FirstCandidates candidates;
  PolicyPhases phases = {};
  /// The search's candidates are scheduled under this policy's rules and
  /// named after it (the optimal policy solves at the order and sub-batch
  /// memfit's own search picks); the phases are still this policy's.
  std::optional<Policy> searchesAs = std::nullopt;
  /// The search's candidates look past tasks that prefetch nothing
  /// (ScheduleOptions::lookPastIdle; memfit's own search). The published
  /// policies keep the look-ahead they were measured with.
  bool looksPastIdle = false;
};

/// The table: every policy, in the order of the enum.
llvm::ArrayRef<PolicyDef> policies();
/// The entry of policy `p`.
const PolicyDef &policyDef(Policy p);
/// The names in table order as a sentence ("ideal, vdnn-all, ... or
/// optimal"), for help and error texts; without the ideal plan where it is
/// not a choice (compare's yardstick).
std::string policyNamesText(bool withIdeal);
/// `memfit compare`'s default policies, in table order.
std::vector<std::string> policiesComparedByDefault();

namespace sched {
/// The rules of policy `p` (its entry's).
inline PolicyRules rulesFor(Policy p) { return policyDef(p).rules; }
} // namespace sched

} // namespace memfit

#endif
