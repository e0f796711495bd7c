//===- Arena.cpp - moDNN's segment list over one static arena -------------===//
#include "passes/Arena.h"

#include <cassert>

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
  segs.emplace(offset, Segment{offset, need, owner, free.uses});
  int64_t end = free.offset + free.size;
  if (end > offset + need) {
    Segment after{offset + need, end - offset - need, -1, free.uses};
    segs.emplace(after.offset, after);
    addFree(after);
  }
  ownerAt[owner] = offset;
  high = std::max(high, offset + need);
  used += need;
  return free.uses;
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
  auto it = segs.find(o->second);
  ownerAt.erase(o);
  assert(it != segs.end() && it->second.owner == owner);
  it->second.owner = -1;
  mergeUses(it->second.uses, uses);
  used -= it->second.size;
  addFree(it->second);
  coalesce(it);
}

void Arena::touch(int32_t owner, Stream st, LastUse use) {
  auto o = ownerAt.find(owner);
  assert(o != ownerAt.end() && "touch of an owner that holds no segment");
  LastUse &u = segs.at(o->second).uses[static_cast<int>(st)];
  if (use.seq > u.seq)
    u = use;
}

const Arena::Segment *Arena::find(int32_t owner) const {
  auto o = ownerAt.find(owner);
  if (o == ownerAt.end())
    return nullptr;
  return &segs.at(o->second);
}

std::optional<Arena::Window>
Arena::findEviction(int64_t bytes,
                    const std::function<bool(int32_t)> &evictable,
                    const std::function<double(const Window &)> &score) const {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  // One pass to flatten the map and ask `evictable` once per occupant.
  struct Slot {
    const Segment *seg;
    bool usable; // free, or an occupant that may leave
  };
  std::vector<Slot> slots;
  slots.reserve(segs.size());
  for (const auto &kv : segs)
    slots.push_back(
        {&kv.second, kv.second.owner < 0 || evictable(kv.second.owner)});
  std::optional<Window> best;
  Window w;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].usable)
      continue;
    w.offset = slots[i].seg->offset;
    w.owners.clear();
    w.ownerUses.clear();
    w.freeUses = {};
    int64_t got = 0;
    size_t j = i;
    for (; j < slots.size() && got < need && slots[j].usable; ++j) {
      const Segment &s = *slots[j].seg;
      if (s.owner >= 0) {
        w.owners.push_back(s.owner);
        w.ownerUses.push_back(&s.uses);
      } else {
        mergeUses(w.freeUses, s.uses);
      }
      got += s.size;
    }
    if (got < need) {
      // Every window starting before the blocker is short too.
      i = j;
      continue;
    }
    // Windows of free segments only are plain allocations, not evictions.
    if (w.owners.empty())
      continue;
    w.score = score(w);
    if (!best || w.score < best->score)
      best = w;
  }
  return best;
}

} // namespace memfit
