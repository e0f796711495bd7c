//===- Arena.cpp - moDNN's segment list over one static arena -------------===//
#include "passes/schedule/Arena.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace memfit {

void mergeUses(StreamUses &into, const StreamUses &from) {
  for (int s = 0; s < kNumStreams; ++s)
    if (from[s].seq > into[s].seq)
      into[s] = from[s];
}

Arena::Arena(int64_t size) : totalSize(size / kArenaAlign * kArenaAlign) {
  if (totalSize > 0) {
    Segment s{0, totalSize, -1, {}};
    segs.emplace(0, s);
    addFree(s);
  }
  history.emplace(0, StreamUses{});
}

void Arena::setHistory(int64_t from, int64_t to, const StreamUses &uses) {
  // Split at `to` so the range after it keeps its uses, then replace
  // everything from `from` up to it.
  if (to < totalSize) {
    auto at = std::prev(history.upper_bound(to));
    if (at->first != to)
      history.emplace_hint(std::next(at), to, at->second);
  }
  auto first = history.lower_bound(from);
  auto last = history.lower_bound(to);
  history.erase(first, last);
  history[from] = uses;
}

StreamUses Arena::historyOf(int64_t from, int64_t to) const {
  StreamUses out{};
  for (auto it = std::prev(history.upper_bound(from));
       it != history.end() && it->first < to; ++it)
    mergeUses(out, it->second);
  return out;
}

std::vector<Arena::Segment> Arena::segments() const {
  std::vector<Segment> out;
  out.reserve(segs.size());
  for (const auto &kv : segs)
    out.push_back(kv.second);
  return out;
}

void Arena::dropFree(const Segment &s) {
  auto range = freeBySize.equal_range(s.size);
  for (auto it = range.first; it != range.second; ++it)
    if (it->second == s.offset) {
      freeBySize.erase(it);
      return;
    }
  assert(false && "free segment missing from the size index");
}

int64_t Arena::largestFree() const {
  return freeBySize.empty() ? 0 : freeBySize.rbegin()->first;
}

std::optional<std::pair<int64_t, StreamUses>> Arena::allocate(int64_t bytes,
                                                              int32_t owner) {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  // Best fit; among equal sizes the lowest offset (the multimap keeps
  // insertion order per key, so pick the lowest explicitly).
  auto it = freeBySize.lower_bound(need);
  if (it == freeBySize.end())
    return std::nullopt;
  int64_t size = it->first, off = it->second;
  for (auto j = it; j != freeBySize.end() && j->first == size; ++j)
    off = std::min(off, j->second);
  return std::make_pair(off, allocateAt(off, bytes, owner));
}

std::optional<std::pair<int64_t, StreamUses>>
Arena::allocateFor(int64_t bytes, int32_t owner, Stream own, double ready) {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  auto freeBy = [&](int64_t off) {
    StreamUses u = historyOf(off, off + need);
    double at = ready;
    for (int s = 0; s < kNumStreams; ++s)
      if (s != static_cast<int>(own) && u[s].seq > 0)
        at = std::max(at, u[s].end);
    return at;
  };
  // Free runs by size, smallest first: the first placement free by `ready`
  // is the best fit. In a run, the lowest offset free by then, so that what
  // is left stays in one piece where it can: the run's start, or where a
  // range of its history starts (the first kKeys), or its end. So many runs
  // only: the scan is on every prefetch, and a deep network's arena has
  // thousands of history ranges.
  constexpr int kRuns = 64, kKeys = 32;
  std::optional<int64_t> best;
  double bestAt = 0;
  int64_t bestSize = 0;
  int runs = 0;
  auto consider = [&](int64_t off, int64_t size) {
    double at = freeBy(off);
    if (!best || at < bestAt ||
        (at == bestAt && size == bestSize && off < *best)) {
      best = off;
      bestAt = at;
      bestSize = size;
    }
    return at <= ready;
  };
  for (auto it = freeBySize.lower_bound(need);
       it != freeBySize.end() && runs < kRuns; ++it, ++runs) {
    if (best && bestAt <= ready && it->first > bestSize)
      break;
    const int64_t from = it->second, last = from + it->first - need;
    if (consider(from, it->first))
      continue;
    bool inTime = false;
    int keys = 0;
    for (auto h = history.upper_bound(from);
         h != history.end() && h->first < last && keys < kKeys; ++h, ++keys)
      if ((inTime = consider(h->first, it->first)))
        break;
    if (!inTime && last > from)
      consider(last, it->first);
  }
  if (!best)
    return std::nullopt;
  return std::make_pair(*best, allocateAt(*best, bytes, owner));
}

StreamUses Arena::allocateAt(int64_t offset, int64_t bytes, int32_t owner) {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  auto it = segs.upper_bound(offset);
  assert(it != segs.begin());
  --it;
  Segment free = it->second;
  assert(free.owner < 0 && free.offset + free.size >= offset + need &&
         "not free");
  dropFree(free);
  segs.erase(it);
  if (offset > free.offset) {
    Segment before{free.offset, offset - free.offset, -1, free.uses};
    segs.emplace(before.offset, before);
    addFree(before);
  }
  StreamUses taken = historyOf(offset, offset + need);
  auto placed = segs.emplace(offset, Segment{offset, need, owner, taken});
  int64_t end = free.offset + free.size;
  if (end > offset + need) {
    Segment after{offset + need, end - offset - need, -1, free.uses};
    segs.emplace(after.offset, after);
    addFree(after);
  }
  ownerAt[owner] = placed.first;
  high = std::max(high, offset + need);
  used += need;
  return taken;
}

void Arena::coalesce(Map::iterator it) {
  if (it != segs.begin()) {
    auto prev = std::prev(it);
    if (prev->second.owner < 0) {
      dropFree(prev->second);
      dropFree(it->second);
      prev->second.size += it->second.size;
      mergeUses(prev->second.uses, it->second.uses);
      segs.erase(it);
      it = prev;
      addFree(it->second);
    }
  }
  auto next = std::next(it);
  if (next != segs.end() && next->second.owner < 0) {
    dropFree(it->second);
    dropFree(next->second);
    it->second.size += next->second.size;
    mergeUses(it->second.uses, next->second.uses);
    segs.erase(next);
    addFree(it->second);
  }
}

void Arena::release(int32_t owner, const StreamUses &uses) {
  auto o = ownerAt.find(owner);
  if (o == ownerAt.end())
    return;
  Map::iterator it = o->second;
  ownerAt.erase(o);
  assert(it->second.owner == owner);
  it->second.owner = -1;
  mergeUses(it->second.uses, uses);
  setHistory(it->second.offset, it->second.offset + it->second.size,
             it->second.uses);
  used -= it->second.size;
  addFree(it->second);
  coalesce(it);
}

void Arena::transfer(int32_t from, int32_t to) {
  auto o = ownerAt.find(from);
  assert(o != ownerAt.end() && "transfer from an owner that holds nothing");
  Map::iterator it = o->second;
  ownerAt.erase(o);
  it->second.owner = to;
  ownerAt[to] = it;
}

void Arena::touch(int32_t owner, Stream st, LastUse use) {
  auto o = ownerAt.find(owner);
  assert(o != ownerAt.end() && "touch of an owner that holds no segment");
  LastUse &u = o->second->second.uses[static_cast<int>(st)];
  if (use.seq > u.seq)
    u = use;
}

const Arena::Segment *Arena::find(int32_t owner) const {
  auto o = ownerAt.find(owner);
  if (o == ownerAt.end())
    return nullptr;
  return &o->second->second;
}

namespace {
/// Prices are summed and compared in whole picoseconds so that a window's
/// price is the same whether it is folded from scratch or slid to.
/// std::llround's result (half away from zero), without the library call
/// for every price of every segment a search looks at: below 2^62 the
/// truncation and the fraction left are exact.
int64_t toPs(double seconds) {
  double x = seconds * 1e12;
  if (!(std::fabs(x) < 0x1p62))
    return std::llround(x);
  auto whole = static_cast<int64_t>(x); // toward zero
  double frac = x - static_cast<double>(whole);
  if (frac >= 0.5)
    ++whole;
  else if (frac <= -0.5)
    --whole;
  return whole;
}
} // namespace

void Arena::priceSlots(Map::const_iterator first, Map::const_iterator last,
                       const std::function<SlotPrice(int32_t)> &price) const {
  std::vector<Slot> &slots = scratch.slots;
  slots.clear();
  for (auto it = first; it != last; ++it) {
    const Segment &s = it->second;
    // Filled in place: a slot built on the stack and copied in stalled on
    // store forwarding, most of this loop's time.
    Slot &sl = slots.emplace_back();
    sl.seg = &s;
    double lastUse = 0;
    for (const LastUse &u : s.uses)
      lastUse = std::max(lastUse, u.end);
    sl.freeAt = toPs(lastUse);
    if (s.owner >= 0) {
      SlotPrice p = price(s.owner);
      sl.usable = p.usable;
      sl.copies = p.copies;
      sl.readyAt = toPs(p.readyAt);
      sl.copy = p.copies ? toPs(p.copySeconds) : 0;
      sl.penalty = toPs(p.penalty);
      sl.moved = p.moved;
    }
  }
  size_t n = slots.size();
  // Prefix sums over slots [0, k): copy time and penalty.
  std::vector<int64_t> &q = scratch.q, &pen = scratch.pen;
  q.assign(n + 1, 0);
  pen.assign(n + 1, 0);
  for (size_t k = 0; k < n; ++k) {
    q[k + 1] = q[k] + slots[k].copy;
    pen[k + 1] = pen[k] + slots[k].penalty;
  }
}

Arena::Found
Arena::slide(Map::const_iterator first, Map::const_iterator last, int64_t need,
             PriceClock clock,
             const std::function<SlotPrice(int32_t)> &price) const {
  // A window's delay is max(0, max(last use of any of its bytes, end of its
  // copy-out chain) - now). The chain c <- max(c, ready_k) + t_k over its
  // copying segments, from the copy stream's free time, unrolls to
  // max(copyFree + sum_k t_k, max_k(ready_k + sum_{j >= k} t_j)); with
  // prefix sums Q of copy times that is a sliding maximum of
  // ready_k - Q[k] plus Q[end], so every window is priced in O(1).
  priceSlots(first, last, price);
  const std::vector<Slot> &slots = scratch.slots;
  const std::vector<int64_t> &q = scratch.q, &pen = scratch.pen;
  size_t n = slots.size();
  int64_t now = toPs(clock.now), copyFree = toPs(clock.copyFree);

  Found found;
  std::optional<Window> &best = found.window;
  __int128 &bestKey = found.key;
  size_t bestI = 0, bestJ = 0;
  // Monotone queues of slot indices, from their heads: decreasing freeAt,
  // and decreasing readyAt - Q over copying slots. Vectors with a head
  // index: indices only join at the back.
  std::vector<size_t> &byFree = scratch.byFree, &byReady = scratch.byReady;
  size_t freeHead = 0, readyHead = 0;
  int64_t got = 0, moved = 0;
  size_t owners = 0, copies = 0;
  size_t j = 0; // the window is [i, j)
  auto restartAt = [&](size_t at) {
    j = at;
    byFree.clear();
    byReady.clear();
    freeHead = readyHead = 0;
    got = moved = 0;
    owners = copies = 0;
  };
  restartAt(0);
  for (size_t i = 0; i < n; ++i) {
    if (!slots[i].usable) {
      restartAt(i + 1);
      continue;
    }
    while (j < n && got < need && slots[j].usable) {
      const Slot &sl = slots[j];
      got += sl.seg->size;
      moved += sl.moved;
      owners += sl.seg->owner >= 0;
      while (byFree.size() > freeHead &&
             slots[byFree.back()].freeAt <= sl.freeAt)
        byFree.pop_back();
      byFree.push_back(j);
      if (sl.copies) {
        ++copies;
        int64_t v = sl.readyAt - q[j];
        while (byReady.size() > readyHead &&
               slots[byReady.back()].readyAt - q[byReady.back()] <= v)
          byReady.pop_back();
        byReady.push_back(j);
      }
      ++j;
    }
    if (got < need) {
      // j is the end or a blocker: every window starting before it is
      // short too.
      i = j;
      restartAt(j + 1);
      continue;
    }
    if (owners > 0) {
      int64_t region = slots[byFree[freeHead]].freeAt;
      if (copies > 0) {
        size_t k = byReady[readyHead];
        int64_t chain =
            std::max(copyFree + q[j] - q[i], slots[k].readyAt - q[k] + q[j]);
        region = std::max(region, chain);
      }
      int64_t timePs = std::max<int64_t>(0, region - now) + (pen[j] - pen[i]);
      // One femtosecond per byte moved, as 1e-15 s per byte.
      __int128 key = static_cast<__int128>(timePs) * 1000 + moved;
      if (!best || key < bestKey) {
        bestKey = key;
        bestI = i;
        bestJ = j;
        best = Window{slots[i].seg->offset,
                      {},
                      static_cast<double>(timePs) * 1e-12 +
                          static_cast<double>(moved) * 1e-15};
      }
    }
    // Drop slot i from the window.
    const Slot &sl = slots[i];
    got -= sl.seg->size;
    moved -= sl.moved;
    owners -= sl.seg->owner >= 0;
    if (byFree.size() > freeHead && byFree[freeHead] == i)
      ++freeHead;
    if (sl.copies) {
      --copies;
      if (byReady.size() > readyHead && byReady[readyHead] == i)
        ++readyHead;
    }
  }
  if (best)
    for (size_t k = bestI; k < bestJ; ++k)
      if (slots[k].seg->owner >= 0)
        best->owners.push_back(slots[k].seg->owner);
  return found;
}

std::optional<Arena::Window>
Arena::findEviction(int64_t bytes, PriceClock clock,
                    const std::function<SlotPrice(int32_t)> &price,
                    const std::vector<int32_t> *focus) const {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  if (!focus)
    return slide(segs.begin(), segs.end(), need, clock, price).window;
  // Every minimal window that holds a focus segment lies within `need`
  // bytes of it on either side: slide over those neighbourhoods only,
  // merged and in address order so ties still go to the lower offset.
  std::vector<Map::const_iterator> &centres = scratch.centres;
  centres.clear();
  for (int32_t owner : *focus) {
    auto o = ownerAt.find(owner);
    if (o != ownerAt.end())
      centres.push_back(o->second);
  }
  // The largest free runs too: windows around them evict the least.
  size_t runs = 0;
  for (auto it = freeBySize.rbegin();
       it != freeBySize.rend() && runs < kFocusFreeRuns; ++it, ++runs)
    centres.push_back(segs.find(it->second));
  std::vector<Range> &ranges = scratch.ranges;
  ranges.clear();
  for (Map::const_iterator at : centres) {
    // A window holding `at` starts less than `need` bytes before it. (One
    // tree step per segment: on large arenas these walks are a good part
    // of a search.)
    auto lo = at;
    for (int64_t before = 0; lo != segs.begin();) {
      auto prev = std::prev(lo);
      before += prev->second.size;
      if (before >= need)
        break;
      lo = prev;
    }
    auto hi = at;
    for (int64_t from = at->second.size; from < need;) {
      auto next = std::next(hi);
      if (next == segs.end())
        break;
      hi = next;
      from += hi->second.size;
    }
    ranges.push_back({lo->first, hi->first, lo, hi});
  }
  std::sort(ranges.begin(), ranges.end());
  Found best;
  for (size_t k = 0; k < ranges.size();) {
    Range merged = ranges[k];
    for (++k; k < ranges.size() && ranges[k].from <= merged.to; ++k)
      if (ranges[k].to > merged.to) {
        merged.to = ranges[k].to;
        merged.last = ranges[k].last;
      }
    Found f = slide(merged.first, std::next(merged.last), need, clock, price);
    if (f.window && (!best.window || f.key < best.key))
      best = std::move(f);
  }
  return best.window;
}

} // namespace memfit
