//===- ArenaTest.cpp - Segment list placement and the eviction search -----===//
#include "passes/schedule/Arena.h"

#include <catch2/catch.hpp>

#include <map>

using namespace memfit;

namespace {

constexpr int64_t S = kArenaAlign; // one slot

/// Prices owners from a table; owners not in it may not leave.
struct Prices {
  std::map<int32_t, Arena::SlotPrice> of;
  Arena::SlotPrice operator()(int32_t owner) const {
    auto it = of.find(owner);
    return it == of.end() ? Arena::SlotPrice{} : it->second;
  }
};

Arena::SlotPrice copyOut(double readyAt, double seconds, int64_t bytes) {
  Arena::SlotPrice p;
  p.usable = true;
  p.copies = true;
  p.readyAt = readyAt;
  p.copySeconds = seconds;
  p.moved = bytes;
  return p;
}

Arena::SlotPrice dropFor(double penalty) {
  Arena::SlotPrice p;
  p.usable = true;
  p.penalty = penalty;
  return p;
}

/// Four owners 1..4 filling a four-slot arena in address order.
Arena fullArena() {
  Arena a(4 * S);
  for (int32_t o = 1; o <= 4; ++o)
    REQUIRE(a.allocate(S, o)->first == (o - 1) * S);
  return a;
}

} // namespace

TEST_CASE("best fit, lowest offset on ties, frees coalesce", "[arena]") {
  Arena a(8 * S);
  // [1: 2 slots][2: 1][3: 2][4: 1][free 2]
  CHECK(a.allocate(2 * S, 1)->first == 0);
  CHECK(a.allocate(1, 2)->first == 2 * S); // rounded up to one slot
  CHECK(a.allocate(2 * S, 3)->first == 3 * S);
  CHECK(a.allocate(S, 4)->first == 5 * S);
  a.release(2, {});
  a.release(4, {});
  // Free runs: [2S, 3S) and [5S, 8S). One slot fits both; best fit takes
  // the smaller run, not the lower address of the larger.
  CHECK(a.allocate(S, 5)->first == 2 * S);
  a.release(5, {});
  a.release(3, {});
  // [2S, 8S) is one run again.
  CHECK(a.largestFree() == 6 * S);
  CHECK(a.usedBytes() == 2 * S);
  CHECK(a.highWater() == 6 * S);
  CHECK_FALSE(a.allocate(7 * S, 6).has_value());
}

TEST_CASE("a freed segment hands its last uses to the next occupant",
          "[arena]") {
  Arena a(2 * S);
  REQUIRE(a.allocate(S, 1));
  StreamUses u{};
  u[static_cast<int>(Stream::CopyOut)] = {7, 0.25};
  a.release(1, u);
  auto got = a.allocate(S, 2);
  REQUIRE(got);
  CHECK(got->first == 0);
  CHECK(got->second[static_cast<int>(Stream::CopyOut)].seq == 7);
  CHECK(got->second[static_cast<int>(Stream::CopyOut)].end == 0.25);
}

TEST_CASE("bytes taken wait only for their own last uses, not for a "
          "neighbour's merged in",
          "[arena]") {
  // Owner 1 at slot 0 last used by compute instruction 9, owner 2 at slot 1
  // by instruction 3. Both freed, the two slots coalesce into one free run
  // (whose merged history, for the eviction search, is instruction 9); a
  // block placed at slot 1 waits for instruction 3 alone, one placed over
  // both slots for both.
  Arena a(3 * S);
  REQUIRE(a.allocate(S, 1));
  REQUIRE(a.allocate(S, 2));
  StreamUses late{}, early{};
  late[static_cast<int>(Stream::Compute)] = {9, 0.9};
  early[static_cast<int>(Stream::Compute)] = {3, 0.3};
  a.release(1, late);
  a.release(2, early);
  CHECK(a.segmentCount() == 1);
  StreamUses second = a.allocateAt(S, S, 3);
  CHECK(second[static_cast<int>(Stream::Compute)].seq == 3);
  StreamUses first = a.allocateAt(0, S, 4);
  CHECK(first[static_cast<int>(Stream::Compute)].seq == 9);
  // Freed again with new uses, the history follows each slot.
  StreamUses again{};
  again[static_cast<int>(Stream::CopyIn)] = {12, 1.2};
  a.release(3, again);
  a.release(4, {});
  StreamUses both = a.allocateAt(0, 2 * S, 5);
  CHECK(both[static_cast<int>(Stream::Compute)].seq == 9);
  CHECK(both[static_cast<int>(Stream::CopyIn)].seq == 12);
  a.release(5, {});
  StreamUses third = a.allocateAt(2 * S, S, 6); // never used
  CHECK(third[static_cast<int>(Stream::Compute)].seq == 0);
  CHECK(third[static_cast<int>(Stream::CopyIn)].seq == 0);
}

TEST_CASE("a copy's placement: best fit among bytes free by the time it "
          "can start, else the soonest free",
          "[arena]") {
  constexpr int C = static_cast<int>(Stream::Compute);
  StreamUses runningUntil5{};
  runningUntil5[C] = {4, 5.0};
  SECTION("bytes the running task just freed are passed over") {
    // [1: 2 slots, a workspace computing until 5][free 6]: freed, it
    // coalesces with the rest. Best fit takes slot 0 and would wait until
    // 5; a copy that can start at 1 goes where the history starts anew.
    Arena a(8 * S);
    REQUIRE(a.allocate(2 * S, 1));
    a.release(1, runningUntil5);
    auto got = a.allocateFor(S, 2, Stream::CopyIn, 1.0);
    REQUIRE(got);
    CHECK(got->first == 2 * S);
    CHECK(got->second[C].seq == 0);
    a.release(2, {});
    // A copy that can only start at 6 takes the best fit, slot 0.
    got = a.allocateFor(S, 3, Stream::CopyIn, 6.0);
    REQUIRE(got);
    CHECK(got->first == 0);
    CHECK(got->second[C].seq == 4);
  }
  SECTION("the copy's own stream is serial: its uses do not count") {
    Arena a(8 * S);
    REQUIRE(a.allocate(2 * S, 1));
    StreamUses copying{};
    copying[static_cast<int>(Stream::CopyIn)] = {4, 5.0};
    a.release(1, copying);
    CHECK(a.allocateFor(S, 2, Stream::CopyIn, 1.0)->first == 0);
  }
  SECTION("best fit while in time: the smaller run wins") {
    // [1: 2][2: 1, free since 0.5][3: 2][free 3]
    Arena a(8 * S);
    REQUIRE(a.allocate(2 * S, 1));
    REQUIRE(a.allocate(S, 2));
    REQUIRE(a.allocate(2 * S, 3));
    StreamUses early{};
    early[C] = {2, 0.5};
    a.release(2, early);
    auto got = a.allocateFor(S, 4, Stream::CopyIn, 1.0);
    REQUIRE(got);
    CHECK(got->first == 2 * S);
    a.release(4, early);
    // Starting at 0.1, the one-slot run would hold it until 0.5.
    CHECK(a.allocateFor(S, 5, Stream::CopyIn, 0.1)->first == 5 * S);
  }
  SECTION("nothing free in time: the soonest") {
    Arena a(4 * S);
    REQUIRE(a.allocate(2 * S, 1));
    REQUIRE(a.allocate(2 * S, 2));
    StreamUses until3{};
    until3[C] = {3, 3.0};
    a.release(1, runningUntil5);
    a.release(2, until3);
    auto got = a.allocateFor(2 * S, 3, Stream::CopyIn, 1.0);
    REQUIRE(got);
    CHECK(got->first == 2 * S);
    CHECK(got->second[C].end == 3.0);
    CHECK_FALSE(a.allocateFor(3 * S, 4, Stream::CopyIn, 1.0));
  }
}

TEST_CASE("eviction: the cheapest window, priced exactly", "[arena]") {
  Arena a = fullArena();
  // 1: copy-out of 1 ms, content ready at 0. 2: host copy valid, free to
  // leave. 3: dropped, a 2 ms recompute later. 4: pinned.
  Prices p;
  p.of[1] = copyOut(0, 1e-3, S);
  p.of[2] = dropFor(0);
  p.of[3] = dropFor(2e-3);
  auto price = [&](int32_t o) { return p(o); };

  // Copy stream idle: {1, 2} costs its 1 ms copy (plus 1 fs per byte
  // moved), {2, 3} the 2 ms recompute; {3, 4} is not allowed.
  auto w = a.findEviction(2 * S, {0, 0}, price);
  REQUIRE(w);
  CHECK(w->offset == 0);
  CHECK(w->owners == std::vector<int32_t>{1, 2});
  CHECK(w->score == Approx(1e-3 + S * 1e-15).epsilon(1e-12));

  // The copy stream busy until 5 ms at now = 1 ms: {1, 2} waits 5 ms, so
  // {2, 3} at 2 ms wins.
  w = a.findEviction(2 * S, {1e-3, 5e-3}, price);
  REQUIRE(w);
  CHECK(w->offset == S);
  CHECK(w->owners == std::vector<int32_t>{2, 3});
  CHECK(w->score == Approx(2e-3).epsilon(1e-12));

  // Nothing needs evicting to take one slot from a window with room, but
  // the search only offers evictions: the best single owner is 2.
  w = a.findEviction(S, {0, 0}, price);
  REQUIRE(w);
  CHECK(w->owners == std::vector<int32_t>{2});
  CHECK(w->score == 0);

  // No run of movable segments holds four slots.
  CHECK_FALSE(a.findEviction(4 * S, {0, 0}, price).has_value());
}

TEST_CASE("eviction: copy-outs queue in address order", "[arena]") {
  Arena a = fullArena();
  // Three copies of 1 ms each; the second's content is ready only at 3 ms.
  // In address order from an idle copy stream they end at 1, 4 and 5 ms.
  Prices p;
  p.of[1] = copyOut(0, 1e-3, S);
  p.of[2] = copyOut(3e-3, 1e-3, S);
  p.of[3] = copyOut(0, 1e-3, S);
  auto w = a.findEviction(3 * S, {0, 0}, [&](int32_t o) { return p(o); });
  REQUIRE(w);
  CHECK(w->owners == std::vector<int32_t>{1, 2, 3});
  CHECK(w->score == Approx(5e-3 + 3 * S * 1e-15).epsilon(1e-12));
  // Two slots: {1, 2} ends at 4 ms, {2, 3} at 5 ms, {3, 4} is pinned.
  w = a.findEviction(2 * S, {0, 0}, [&](int32_t o) { return p(o); });
  REQUIRE(w);
  CHECK(w->owners == std::vector<int32_t>{1, 2});
  CHECK(w->score == Approx(4e-3 + 2 * S * 1e-15).epsilon(1e-12));
}

TEST_CASE("eviction: free bytes still in use delay a window; ties go low",
          "[arena]") {
  Arena a(5 * S);
  for (int32_t o = 1; o <= 5; ++o)
    REQUIRE(a.allocate(S, o));
  // Owner 2's bytes are read by a kernel until 4 ms; once freed, whoever
  // takes them waits for that.
  StreamUses busy{};
  busy[static_cast<int>(Stream::Compute)] = {3, 4e-3};
  a.release(2, busy);
  Prices p;
  for (int32_t o : {1, 3, 4, 5})
    p.of[o] = dropFor(1e-3);
  auto price = [&](int32_t o) { return p(o); };
  // Windows of two slots: {1, free} and {free, 3} wait until 4 ms (3 ms
  // after now = 1 ms) plus a 1 ms drop; {3, 4} and {4, 5} pay two drops.
  auto w = a.findEviction(2 * S, {1e-3, 0}, price);
  REQUIRE(w);
  CHECK(w->offset == 2 * S); // the lower of the two 2 ms ties
  CHECK(w->owners == std::vector<int32_t>{3, 4});
  CHECK(w->score == Approx(2e-3).epsilon(1e-12));
  // Once the kernel is done (now = 5 ms), the free slot costs nothing.
  w = a.findEviction(2 * S, {5e-3, 0}, price);
  REQUIRE(w);
  CHECK(w->offset == 0);
  CHECK(w->owners == std::vector<int32_t>{1});
  CHECK(w->score == Approx(1e-3).epsilon(1e-12));
}

TEST_CASE("focused eviction: only windows near the focus and free runs",
          "[arena]") {
  Arena a(8 * S);
  for (int32_t o = 1; o <= 8; ++o)
    REQUIRE(a.allocate(S, o));
  Prices p;
  for (int32_t o = 1; o <= 8; ++o)
    p.of[o] = dropFor(o * 1e-3); // owner o costs o ms
  auto price = [&](int32_t o) { return p(o); };
  std::vector<int32_t> focus{5};
  // The whole arena's cheapest single slot is owner 1; around owner 5 it is
  // owner 5 itself (its neighbourhood reaches one slot either way).
  auto w = a.findEviction(S, {0, 0}, price, &focus);
  REQUIRE(w);
  CHECK(w->owners == std::vector<int32_t>{5});
  // Two slots: {4, 5} at 9 ms beats {5, 6} at 11 ms; {1, 2} is not seen.
  w = a.findEviction(2 * S, {0, 0}, price, &focus);
  REQUIRE(w);
  CHECK(w->owners == std::vector<int32_t>{4, 5});
  CHECK(w->score == Approx(9e-3).epsilon(1e-12));
  CHECK(a.findEviction(2 * S, {0, 0}, price)->owners ==
        std::vector<int32_t>{1, 2});
  // A free run is always a centre: with owner 8 gone, {7, free} costs 7 ms.
  a.release(8, {});
  w = a.findEviction(2 * S, {0, 0}, price, &focus);
  REQUIRE(w);
  CHECK(w->offset == 6 * S);
  CHECK(w->owners == std::vector<int32_t>{7});
}
