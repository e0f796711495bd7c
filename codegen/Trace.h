//===- Trace.h - The plan as a Chrome trace ---------------------*- C++ -*-===//
//
// trace.json in the Chrome trace event format (the JSON object form), which
// Perfetto and chrome://tracing open: one process for the plan, one track
// (thread) per stream -- compute, copy-out, copy-in -- with every task and
// transfer of one round as a complete ("X") slice at its simulated start and
// duration, the weight update after the round, and the arena bytes in use as
// a counter ("C") that changes exactly where arenaTimeline() does.
// Timestamps are microseconds. Deterministic: same report, same bytes.
//
//===----------------------------------------------------------------------===//
#ifndef MEMFIT_CODEGEN_TRACE_H
#define MEMFIT_CODEGEN_TRACE_H

#include "codegen/PlanReport.h"

#include <string>

namespace memfit {

/// Track ids (Chrome "tid") of the three streams: 1 compute, 2 copy-out,
/// 3 copy-in.
int traceTrackOf(const std::string &stream);

std::string planToTrace(const PlanReport &r);

} // namespace memfit

#endif
