//===- Arena.h - moDNN's segment list over one static arena -----*- C++ -*-===//
//
// The memory manager the scheduler simulates with: the arena as an ordered
// list of occupied and free segments (moDNN section IV-B). Each segment
// remembers, per stream, the last instruction that touched its bytes, so
// whoever reuses them knows which events to wait for; freeing never loses
// that history, merging free segments keeps the latest per stream (what
// the eviction search prices). An allocation waits only for the uses of
// the bytes it takes: the history is also kept per byte range.
//
// Guarantees: segments tile [0, size) exactly; occupied segments never
// overlap; every offset handed out is aligned to kArenaAlign.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_ARENA_H
#define MEMFIT_PASSES_ARENA_H

#include "compiler/ir/Plan.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <optional>
#include <unordered_map>
#include <vector>

namespace memfit {

constexpr int64_t kArenaAlign = 256; // cuDNN and cuBLAS like 256-byte starts
/// A focused eviction search also looks around this many of the largest
/// free runs.
constexpr size_t kFocusFreeRuns = 16;

inline int64_t alignUp(int64_t x) {
  return (x + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
}

/// The last use of some bytes on one stream: the instruction (its index in
/// issue order, plus one; 0 for never used) and its predicted finish time.
/// On one stream a later index is a later use.
struct LastUse {
  int32_t seq = 0;
  double end = 0;
};
using StreamUses = std::array<LastUse, kNumStreams>;

void mergeUses(StreamUses &into, const StreamUses &from);

class Arena {
public:
  struct Segment {
    int64_t offset = 0, size = 0;
    int32_t owner = -1; // the scheduler's id of what occupies it; -1 free
    StreamUses uses{};
  };

  explicit Arena(int64_t size);

  int64_t size() const { return totalSize; }
  /// Highest offset + size ever allocated.
  int64_t highWater() const { return high; }
  int64_t usedBytes() const { return used; }
  int64_t largestFree() const;
  /// The segments in address order (a copy: for rare whole-arena walks).
  std::vector<Segment> segments() const;

  /// Best fit among free runs; returns the offset and the uses of the bytes
  /// it takes, or nothing when no free run is large enough.
  std::optional<std::pair<int64_t, StreamUses>> allocate(int64_t bytes,
                                                         int32_t owner);
  /// For a copy on stream `own` that can start at `ready`: best fit among
  /// the placements whose bytes no other stream still uses after `ready`
  /// (in a free run, the lowest such offset); when none, the placement whose
  /// bytes are free soonest. Best fit alone may hand a prefetch the workspace
  /// the running task just freed and hold the copy until that task ends.
  std::optional<std::pair<int64_t, StreamUses>>
  allocateFor(int64_t bytes, int32_t owner, Stream own, double ready);
  /// Places `owner` at exactly [offset, offset + bytes), which must be free.
  StreamUses allocateAt(int64_t offset, int64_t bytes, int32_t owner);
  /// Frees what `owner` occupies, recording its last uses on the bytes.
  void release(int32_t owner, const StreamUses &uses);
  /// Hands the segment `from` occupies, with its history, to `to`: an
  /// output written in place over its input.
  void transfer(int32_t from, int32_t to);
  /// Records a use of an occupied segment (kept when it is released).
  void touch(int32_t owner, Stream s, LastUse use);
  const Segment *find(int32_t owner) const;

  /// What taking one segment costs, in parts that compose over a window of
  /// contiguous segments. The caller prices occupants; the arena adds when
  /// the segment's bytes are last used.
  struct SlotPrice {
    bool usable = false; // may its occupant leave?
    bool copies = false; // leaves by a copy-out (else dropped or host-valid)
    double readyAt = 0;  // copy-out: when its content is ready
    double copySeconds = 0;
    double penalty = 0; // seconds paid later (a recompute, a late prefetch)
    int64_t moved = 0;  // bytes moved either way, to break ties
  };
  /// The moment of pricing: the compute stream's and copy-out stream's
  /// free times.
  struct PriceClock {
    double now = 0, copyFree = 0;
  };
  /// A window of contiguous segments that, once its occupants are evicted,
  /// frees at least the bytes asked for.
  struct Window {
    int64_t offset = 0;
    std::vector<int32_t> owners; // occupants to evict, in address order
    double score = 0;
  };
  /// The cheapest window. A window's price is moDNN's delay, the time from
  /// `now` until its bytes are free (their last uses done, and its copy-outs
  /// done one after another on the copy-out stream in address order), plus
  /// the penalties of its occupants, plus 1e-15 per byte moved so equal
  /// delays prefer less traffic. Only minimal windows (no segment can be
  /// dropped from the end) of usable segments are candidates, and those
  /// that are all free space are not evictions. Ties go to the lower
  /// offset. Runs in time linear in the number of segments; given `focus`
  /// (occupants), only the windows near them and near the largest free
  /// runs are candidates, in time linear in those neighbourhoods.
  std::optional<Window>
  findEviction(int64_t bytes, PriceClock clock,
               const std::function<SlotPrice(int32_t owner)> &price,
               const std::vector<int32_t> *focus = nullptr) const;
  size_t segmentCount() const { return segs.size(); }

private:
  using Map = std::pmr::map<int64_t, Segment>; // by offset
  struct Found {
    std::optional<Window> window;
    __int128 key = 0; // picoseconds x 1000 + bytes moved
  };
  /// The cheapest window within [first, last).
  Found slide(Map::const_iterator first, Map::const_iterator last, int64_t need,
              PriceClock clock,
              const std::function<SlotPrice(int32_t)> &price) const;
  /// Prices the segments [first, last) into scratch's slots and their
  /// prefix sums.
  void priceSlots(Map::const_iterator first, Map::const_iterator last,
                  const std::function<SlotPrice(int32_t)> &price) const;
  /// One segment as slide() prices it, in whole picoseconds.
  struct Slot {
    const Segment *seg = nullptr;
    bool usable = true, copies = false;
    int64_t freeAt = 0, readyAt = 0, copy = 0, penalty = 0, moved = 0;
  };
  /// The segments [first, last] at offsets [from, to]: a focused search's
  /// neighbourhood, kept as iterators so that sliding over it needs no
  /// look-up.
  struct Range {
    int64_t from, to;
    Map::const_iterator first, last;
    bool operator<(const Range &o) const {
      return std::pair(from, to) < std::pair(o.from, o.to);
    }
  };
  /// The eviction search's working storage, kept from one search to the
  /// next: a schedule searches tens of thousands of times, each over
  /// dozens of neighbourhoods, and these were allocated every time. (So
  /// one arena runs one search at a time, as each schedule owns its arena.)
  struct Scratch {
    std::vector<Slot> slots;
    std::vector<int64_t> q, pen;              // prefix sums over the slots
    std::vector<size_t> byFree, byReady;      // monotone queues of slot indices
    std::vector<Map::const_iterator> centres; // what a focused search is near
    std::vector<Range> ranges;
  };
  mutable Scratch scratch;
  /// Merges the free segment at `it` with free neighbours.
  void coalesce(Map::iterator it);
  /// The segments' nodes come from a pool of their own: an eviction search
  /// walks hundreds of neighbouring segments, and with the nodes scattered
  /// among the planner's other allocations nearly every step missed the
  /// cache. (Held by pointer so that an arena can still be moved.)
  std::unique_ptr<std::pmr::unsynchronized_pool_resource> pool =
      std::make_unique<std::pmr::unsynchronized_pool_resource>();
  Map segs{pool.get()};
  /// Owner -> its segment; the nodes of a std::map stay put, so this saves
  /// a search of the map on every touch, release and look-up.
  std::unordered_map<int32_t, Map::iterator> ownerAt;
  std::multimap<int64_t, int64_t> freeBySize; // free size -> offset
  /// The last uses of the bytes by range: each key starts a range that runs
  /// to the next key (or the arena's end). Written when a segment is freed,
  /// read when bytes are taken, so that bytes next to a just-freed segment
  /// do not inherit its uses by a merge.
  std::pmr::map<int64_t, StreamUses> history{pool.get()};
  void setHistory(int64_t from, int64_t to, const StreamUses &uses);
  StreamUses historyOf(int64_t from, int64_t to) const;
  void addFree(const Segment &s) { freeBySize.emplace(s.size, s.offset); }
  void dropFree(const Segment &s);
  int64_t totalSize, high = 0, used = 0;
};

} // namespace memfit

#endif
