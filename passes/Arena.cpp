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
  if (totalSize > 0)
    segs.push_back({0, totalSize, -1, {}});
}

void Arena::mergeFree() {
  std::vector<Segment> out;
  for (Segment &s : segs) {
    if (!out.empty() && out.back().owner < 0 && s.owner < 0) {
      out.back().size += s.size;
      mergeUses(out.back().uses, s.uses);
    } else {
      out.push_back(s);
    }
  }
  segs.swap(out);
}

std::optional<std::pair<int64_t, StreamUses>> Arena::allocate(int64_t bytes,
                                                              int32_t owner) {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  int best = -1;
  for (int i = 0; i < (int)segs.size(); ++i)
    if (segs[i].owner < 0 && segs[i].size >= need &&
        (best < 0 || segs[i].size < segs[best].size))
      best = i;
  if (best < 0)
    return std::nullopt;
  int64_t off = segs[best].offset;
  return std::make_pair(off, allocateAt(off, bytes, owner));
}

StreamUses Arena::allocateAt(int64_t offset, int64_t bytes, int32_t owner) {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  size_t i = 0;
  while (i < segs.size() && segs[i].offset + segs[i].size <= offset)
    ++i;
  assert(i < segs.size() && segs[i].owner < 0 &&
         segs[i].offset + segs[i].size >= offset + need && "not free");
  Segment free = segs[i];
  std::vector<Segment> parts;
  if (offset > free.offset)
    parts.push_back({free.offset, offset - free.offset, -1, free.uses});
  parts.push_back({offset, need, owner, free.uses});
  int64_t end = free.offset + free.size;
  if (end > offset + need)
    parts.push_back({offset + need, end - offset - need, -1, free.uses});
  segs.erase(segs.begin() + i);
  segs.insert(segs.begin() + i, parts.begin(), parts.end());
  high = std::max(high, offset + need);
  used += need;
  return free.uses;
}

void Arena::release(int32_t owner, const StreamUses &uses) {
  for (Segment &s : segs)
    if (s.owner == owner) {
      s.owner = -1;
      mergeUses(s.uses, uses);
      used -= s.size;
      break;
    }
  mergeFree();
}

void Arena::touch(int32_t owner, Stream st, LastUse use) {
  for (Segment &s : segs)
    if (s.owner == owner) {
      LastUse &u = s.uses[static_cast<int>(st)];
      if (use.seq > u.seq)
        u = use;
      return;
    }
  assert(false && "touch of an owner that holds no segment");
}

int64_t Arena::largestFree() const {
  int64_t best = 0;
  for (const Segment &s : segs)
    if (s.owner < 0)
      best = std::max(best, s.size);
  return best;
}

const Arena::Segment *Arena::find(int32_t owner) const {
  for (const Segment &s : segs)
    if (s.owner == owner)
      return &s;
  return nullptr;
}

std::optional<Arena::Window>
Arena::findEviction(int64_t bytes,
                    const std::function<bool(int32_t)> &evictable,
                    const std::function<double(const Window &)> &score) const {
  int64_t need = alignUp(std::max<int64_t>(bytes, 1));
  std::optional<Window> best;
  for (size_t i = 0; i < segs.size(); ++i) {
    Window w;
    w.offset = segs[i].offset;
    int64_t got = 0;
    bool ok = true;
    for (size_t j = i; j < segs.size() && got < need; ++j) {
      const Segment &s = segs[j];
      if (s.owner >= 0 && !evictable(s.owner)) {
        ok = false;
        break;
      }
      if (s.owner >= 0)
        w.owners.push_back(s.owner);
      else
        mergeUses(w.freeUses, s.uses);
      got += s.size;
    }
    // Windows of free segments only are plain allocations, not evictions.
    if (!ok || got < need || w.owners.empty())
      continue;
    w.score = score(w);
    if (!best || w.score < best->score)
      best = std::move(w);
  }
  return best;
}

} // namespace memfit
