//===- StreamTimeline.h - Streams, their clocks and events ------*- C++ -*-===//
//
// The instructions of one round as the scheduler issues them, on the
// compute stream and the two copy streams, with each one's predicted start
// and finish. An instruction that depends on one of another stream gets a
// wait on an event recorded after it; a vector clock per stream (how far
// each stream is known to have got) skips the waits an earlier wait already
// implies.
//
// Guarantees: every dependency handed to emit() is ordered before the
// instruction, by stream order or by an event; an instruction starts no
// earlier than its stream is free and its dependencies have finished; event
// ids are dense from 0 in the order first needed.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_PASSES_STREAMTIMELINE_H
#define MEMFIT_PASSES_STREAMTIMELINE_H

#include "compiler/ir/Plan.h"

#include <array>
#include <cstdint>
#include <vector>

namespace memfit::sched {

inline int streamIndex(Stream s) { return static_cast<int>(s); }

class StreamTimeline {
public:
  /// Issues `in` on its stream once the instructions `deps` (indices; < 0
  /// for none) are done; returns its index.
  int32_t emit(Instr in, double duration, const std::vector<int32_t> &deps);
  /// Joins the streams so that what follows the round starts after
  /// everything in it: the compute stream waits for the last copy of each
  /// copy stream, each copy stream for the last task and for the other's
  /// last copy. A copy stream's wait for the last task does not cover a
  /// copy that no task waited for (a gradient going home after the last
  /// task, or a block copied out as soon as it was made that never had to
  /// leave), and the next round's first copy-in may reuse its bytes. A
  /// wait already implied adds nothing.
  void join();

  /// When stream `s` has finished everything issued on it.
  double freeAt(Stream s) const { return streamFree[streamIndex(s)]; }
  /// The predicted finish of instruction `i`.
  double endOf(int32_t i) const { return timing[i].end; }
  EventId numEvents() const { return events; }
  /// The round as the plan holds it: every instruction, each followed by
  /// the Record of its event when something waits for it.
  std::vector<Instr> round() const;

private:
  using Clock = std::array<int32_t, kNumStreams>;
  struct Timing {
    double start = 0, end = 0;
    Clock after{}; // what the stream has done once this instruction finished
    EventId recordAfter = -1;
  };
  /// Makes stream `s` wait for instruction `dep` unless it is ordered
  /// already; raises `earliest` to its finish.
  void waitFor(Stream s, int32_t dep, double &earliest);

  std::vector<Instr> instrs;
  std::vector<Timing> timing;
  std::array<double, kNumStreams> streamFree{};
  std::array<Clock, kNumStreams> clocks{};
  std::array<int32_t, kNumStreams> lastOn{-1, -1, -1};
  EventId events = 0;
};

} // namespace memfit::sched

#endif
