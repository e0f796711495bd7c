//===- EvictionPricer.h - Who may leave the arena, at what cost -*- C++ -*-===//
//
// Prices evictions for Arena::findEviction under the policy's rules: which
// occupants may leave (moDNN's criteria and the policy's), whether one
// leaving is dropped for recomputation or copied out, and what that costs
// the compute stream now and later. Within one search (between two
// newSearch() calls) the scheduler's state does not change, so who may
// leave and what dropping costs are memoised per search. On large arenas
// the search looks only around the occupants with the farthest next use,
// from a lazy index the scheduler keeps current with indexNextUse().
//
// Guarantees: reads the scheduler's state, never changes it; the same state
// always gives the same prices and the same window, memoised or not.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_EVICTIONPRICER_H
#define MEMFIT_PASSES_EVICTIONPRICER_H

#include "passes/schedule/Arena.h"
#include "passes/schedule/PolicyRules.h"
#include "passes/schedule/Residencies.h"
#include "passes/schedule/StreamTimeline.h"

#include <functional>
#include <limits>
#include <optional>
#include <set>

namespace memfit::sched {

/// The arena owner id of a task's workspace (never evictable).
constexpr int32_t kWorkspaceOwner = 1 << 30;
/// Arenas with more segments than this are searched around kFocusOwners
/// candidates only (EvictionPricer::search).
constexpr size_t kExactSearchSegments = 4096;
constexpr size_t kFocusOwners = 64;
/// The most producer runs EvictionPricer prices in one recompute chain.
constexpr size_t kMaxPricedChain = 256;

class EvictionPricer {
public:
  using PriceFn = std::function<Arena::SlotPrice(int32_t owner)>;

  EvictionPricer(const TaskGraph &tg, const CostTable &costs,
                 const PolicyRules &rules, bool allowRecompute,
                 const Residencies &blocks, const StreamTimeline &timeline,
                 const Arena &arena, const RoundCursor &cursor)
      : tg(tg), costs(costs), rules(rules), allowRecompute(allowRecompute),
        blocks(blocks), timeline(timeline), arena(arena), cursor(cursor),
        entryOf(tg.blocks.size()) {}

  /// Starts a new search: forgets the memoised answers.
  void newSearch() { ++epoch; }
  /// May the occupant `owner` leave now? Memoised within a search.
  bool mayLeave(int32_t owner) const;
  /// What evicting `owner` costs (not usable when it may not leave).
  Arena::SlotPrice price(int32_t owner) const;
  /// Whether evicting `b` (without a host copy) drops it rather than
  /// copying it out. Not memoised.
  bool shouldDrop(BlockId b) const;
  /// The cheapest window freeing `bytes` under `price`: over the whole
  /// arena while it holds few segments, beyond kExactSearchSegments only
  /// around the occupants with the farthest next use.
  std::optional<Arena::Window> search(int64_t bytes, const PriceFn &price);
  /// Records b's current residency under its next use, for search().
  void indexNextUse(BlockId b);

private:
  bool evictable(int32_t owner) const;
  /// < 0: evicting b copies it out; else the seconds recomputing it costs.
  /// Memoised within a search.
  double dropSeconds(BlockId b) const;
  /// shouldDrop(b) and what the drop costs in one evaluation: the seconds
  /// recomputing b costs when it is dropped, < 0 when it is copied out.
  /// The recompute chain is priced once, for the decision and the price.
  double dropPrice(BlockId b) const;
  /// Seconds to recompute b now: its producer and, transitively, the
  /// producers of its dropped inputs, each once (up to kMaxPricedChain);
  /// the sum so far once it reaches `enough`.
  double recomputeSeconds(
      BlockId b, double enough = std::numeric_limits<double>::infinity()) const;
  /// b's key in `farthest`: its next use step, the largest when none.
  int32_t farthestKey(BlockId b) const;
  /// Up to kFocusOwners residencies that `price` finds usable, farthest
  /// next use first, into `focus`.
  void farthestUsable(const PriceFn &price, std::vector<int32_t> &focus);
  double gapUntil(int32_t next) const {
    double now = timeline.freeAt(Stream::Compute);
    return cursor.estimatedStart(next, now) - now;
  }

  const TaskGraph &tg;
  const CostTable &costs;
  const PolicyRules &rules;
  const bool allowRecompute;
  const Residencies &blocks;
  const StreamTimeline &timeline;
  const Arena &arena;
  const RoundCursor &cursor;

  uint64_t epoch = 1;
  mutable std::vector<std::pair<uint64_t, bool>> evictCache;  // per residency
  mutable std::vector<std::pair<uint64_t, double>> dropCache; // per block
  /// recomputeSeconds' walk: tasks seen in the current walk, its stack.
  mutable std::vector<uint64_t> taskSeen;
  mutable uint64_t seenStamp = 0;
  mutable std::vector<TaskId> chainStack;
  /// Residencies by their block's next use step (no next use: largest),
  /// farthest first, ties to the later residency; one entry per block,
  /// replaced when the block is indexed again. An entry goes stale when
  /// its block leaves the device and is dropped when a search meets it.
  /// Ordered rather than a heap: every focused search walks the first
  /// hundreds of entries, which a heap shows only by popping each one and
  /// pushing it back.
  using NextUseIndex =
      std::set<std::pair<int32_t, ResidencyId>, std::greater<>>;
  NextUseIndex farthest;
  std::vector<std::optional<NextUseIndex::iterator>> entryOf; // per block
  std::vector<int32_t> focus; // farthestUsable()'s, kept between searches
};

} // namespace memfit::sched

#endif
