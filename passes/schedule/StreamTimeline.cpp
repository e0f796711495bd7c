//===- StreamTimeline.cpp - Streams, their clocks and events --------------===//
#include "passes/schedule/StreamTimeline.h"

#include <algorithm>

namespace memfit::sched {

void StreamTimeline::waitFor(Stream s, int32_t dep, double &earliest) {
  if (dep < 0)
    return;
  const Timing &d = timing[dep];
  earliest = std::max(earliest, d.end);
  Stream ds = instrs[dep].stream;
  if (ds == s)
    return;
  if (clocks[streamIndex(s)][streamIndex(ds)] >= d.after[streamIndex(ds)])
    return; // already ordered through an earlier wait
  if (timing[dep].recordAfter < 0)
    timing[dep].recordAfter = events++;
  Instr w;
  w.kind = InstrKind::Wait;
  w.stream = s;
  w.event = timing[dep].recordAfter;
  instrs.push_back(w);
  Timing wt;
  wt.start = wt.end = 0; // waits take no time of their own
  Clock &c = clocks[streamIndex(s)];
  for (int k = 0; k < kNumStreams; ++k)
    c[k] = std::max(c[k], d.after[k]);
  wt.after = c;
  timing.push_back(wt);
}

int32_t StreamTimeline::emit(Instr in, double duration,
                             const std::vector<int32_t> &deps) {
  int s = streamIndex(in.stream);
  double earliest = streamFree[s];
  for (int32_t d : deps)
    waitFor(in.stream, d, earliest);
  auto idx = static_cast<int32_t>(instrs.size());
  Timing t;
  t.start = earliest;
  t.end = earliest + duration;
  clocks[s][s] = idx + 1;
  t.after = clocks[s];
  streamFree[s] = t.end;
  lastOn[s] = idx;
  instrs.push_back(std::move(in));
  timing.push_back(t);
  return idx;
}

void StreamTimeline::join() {
  double unused = 0;
  for (Stream s : {Stream::CopyOut, Stream::CopyIn})
    waitFor(Stream::Compute, lastOn[streamIndex(s)], unused);
  for (Stream s : {Stream::CopyOut, Stream::CopyIn})
    waitFor(s, lastOn[streamIndex(Stream::Compute)], unused);
  waitFor(Stream::CopyIn, lastOn[streamIndex(Stream::CopyOut)], unused);
  waitFor(Stream::CopyOut, lastOn[streamIndex(Stream::CopyIn)], unused);
}

std::vector<Instr> StreamTimeline::round() const {
  std::vector<Instr> out;
  out.reserve(instrs.size() + static_cast<size_t>(events));
  for (size_t k = 0; k < instrs.size(); ++k) {
    out.push_back(instrs[k]);
    if (timing[k].recordAfter >= 0) {
      Instr rec;
      rec.kind = InstrKind::Record;
      rec.stream = instrs[k].stream;
      rec.event = timing[k].recordAfter;
      out.push_back(rec);
    }
  }
  return out;
}

} // namespace memfit::sched
