//===- StreamTimelineTest.cpp - Streams, events and the round's end -------===//
#include "passes/schedule/StreamTimeline.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace memfit;
using namespace memfit::sched;

namespace {

Instr instr(InstrKind k, Stream s) {
  Instr in;
  in.kind = k;
  in.stream = s;
  if (k == InstrKind::Run)
    in.task = 0;
  else
    in.residency = 0;
  return in;
}

/// The waits on stream `s` for the event recorded after the first
/// instruction of kind `k`.
int waitsFor(const std::vector<Instr> &round, InstrKind k, Stream s) {
  auto it = std::find_if(round.begin(), round.end(),
                         [&](const Instr &in) { return in.kind == k; });
  REQUIRE(it != round.end());
  if (it + 1 == round.end() || (it + 1)->kind != InstrKind::Record)
    return 0;
  EventId e = (it + 1)->event;
  return static_cast<int>(
      std::count_if(round.begin(), round.end(), [&](const Instr &in) {
        return in.kind == InstrKind::Wait && in.stream == s && in.event == e;
      }));
}

} // namespace

TEST_CASE("the round's end orders a copy-out no task waited for",
          "[schedule]") {
  // A copy-out after a task, and compute going on without it (a block
  // copied out as soon as it was made that never had to leave). The next
  // round's first copy-in may reuse its bytes: the copy-in stream waits for
  // it. Waiting for the compute stream's last task does not cover it: the
  // compute stream's own wait for the copy comes after that task. (A
  // MobileNet V3 in two chunks failed the plan verifier's overlap check.)
  StreamTimeline tl;
  int32_t made = tl.emit(instr(InstrKind::Run, Stream::Compute), 1e-3, {});
  tl.emit(instr(InstrKind::CopyOut, Stream::CopyOut), 5e-3, {made});
  tl.emit(instr(InstrKind::Run, Stream::Compute), 1e-3, {});
  tl.emit(instr(InstrKind::CopyIn, Stream::CopyIn), 1e-3, {});
  tl.join();
  std::vector<Instr> round = tl.round();
  CHECK(waitsFor(round, InstrKind::CopyOut, Stream::Compute) == 1);
  CHECK(waitsFor(round, InstrKind::CopyOut, Stream::CopyIn) == 1);
  CHECK(waitsFor(round, InstrKind::CopyIn, Stream::CopyOut) == 1);

  // Where the last task waited for the copy already, the copy-in stream's
  // wait for that task implies it: no second wait.
  StreamTimeline ordered;
  made = ordered.emit(instr(InstrKind::Run, Stream::Compute), 1e-3, {});
  int32_t out =
      ordered.emit(instr(InstrKind::CopyOut, Stream::CopyOut), 5e-3, {made});
  ordered.emit(instr(InstrKind::Run, Stream::Compute), 1e-3, {out});
  ordered.join();
  round = ordered.round();
  CHECK(waitsFor(round, InstrKind::CopyOut, Stream::Compute) == 1);
  CHECK(waitsFor(round, InstrKind::CopyOut, Stream::CopyIn) == 0);
}
