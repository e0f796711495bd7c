//===- PlanningReport.cpp - The outcome as the one report -----------------===//
//
// Turns the planner's outcome into codegen's PlanReport, once per command:
// everything the plan alone does not know (the lower bound, the ideal
// yardstick, the search, the profile, the attention choice) goes into its
// PlanContext here and nowhere else.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanJson.h"
#include "codegen/ReportHtml.h"
#include "codegen/Trace.h"
#include "compiler/cost/Accuracy.h"
#include "tools/memfit/Planning.h"

using namespace llvm;

namespace memfit::tool {

namespace {

/// The planner's outcome as codegen's report reads it: what the plan
/// alone does not know.
PlanContext planContext(PlanningSession &s, const PlanOutcome &o) {
  PlanContext c;
  c.modelFile = s.modelPath;
  c.device = s.costs->device().name;
  c.lowerBoundBytes = o.lowerBound.bytes;
  c.lowerBoundTask =
      o.lowerBound.task >= 0 ? s.tg.tasks[o.lowerBound.task].name : "";
  c.idealPeakBytes = o.idealPeakBytes;
  c.idealSeconds = o.idealSeconds;
  c.eq3SubBatch = o.eq3SubBatch;
  c.subBatchesTried = o.tried;
  for (auto [k, t] : o.chunksTried)
    c.chunksTried.push_back({k, t});
  for (auto [k, t] : o.chunksPruned)
    c.chunksPruned.push_back({k, t});
  c.refineTries = o.refineTries;
  c.refineChanged = o.refineChanged;
  ProfileUsage u = s.costs->profileUsage();
  if (u.hasProfile) {
    c.profile.used = true;
    c.profile.file = s.profilePath;
    c.profile.measured = static_cast<int64_t>(u.exact);
    c.profile.interpolated = static_cast<int64_t>(u.interpolated);
    c.profile.estimated = static_cast<int64_t>(u.missing);
    c.profile.estimatedExamples = u.missingExamples;
  }
  c.attention = s.attentionNote;
  c.head = s.headNote;
  c.fuse = s.fuseNote;
  c.trainOnly = s.freeze.trainOnly;
  c.freeze = s.freeze.freeze;
  c.exact = o.exact;
  c.accumulate = accumulateFlag();
  c.boundSeconds = o.bound ? o.bound->seconds : 0;
  c.spaceBoundSeconds = o.spaceBoundSeconds;
  c.boundWhy = o.boundWhy;
  {
    const Accuracy a =
        accuracyFor(s.costs->device().computeCapability, s.tg.precision);
    c.accuracyClass = a.deviceClass;
    c.accuracyPrecision = a.precision;
    c.accuracyCases = a.cases;
    c.accuracyLow = a.low;
    c.accuracyHigh = a.high;
    c.accuracyBasis = a.basis;
  }
  c.planSeconds = o.planSeconds;
  if (const std::optional<OptimalOutcome> &opt = o.optimal)
    c.optimal = ReportOptimal{.objectiveSeconds = opt->objectiveSeconds,
                              .proven = opt->proven,
                              .nodes = opt->nodes,
                              .maxNodes = opt->maxNodes,
                              .blocks = opt->candidates,
                              .offloaded = opt->offloaded,
                              .recomputed = opt->recomputed,
                              .rows = opt->rows,
                              .columns = opt->columns,
                              .memfitSeconds = opt->memfitSeconds,
                              .solveSeconds = opt->solveSeconds,
                              .realization = opt->realization,
                              .subBatchesSolved = opt->subBatchesSolved};
  if (s.tg.dp.active())
    c.collectiveLink = collectiveCost(s.costs->device(), s.tg.dp).link;
  if (o.chunked) {
    s.chunkedTable = chunkedCosts(*o.chunked, s.tableAt(o.plan.subBatch));
    c.costs = &*s.chunkedTable;
  } else {
    c.costs = &s.tableAt(o.plan.subBatch);
  }
  return c;
}

} // namespace

PlanReport planReport(PlanningSession &s, const PlanOutcome &o,
                      ReportDetail detail) {
  PlanContext c = planContext(s, o);
  const TaskGraph &tg = o.scheduledGraph(s.tg);
  PlanReport r = detail == ReportDetail::Full
                     ? buildPlanReport(tg, o.plan, o.sim, c)
                     : buildPlanSummary(tg, o.plan, o.sim, c);
  ReportEvaluation &e = r.evaluation;
  e.why = s.evalWhy;
  if (const std::optional<PlanOutcome> &ev = s.evalOutcome) {
    e.planned = true;
    e.subBatch = ev->plan.subBatch;
    e.numSubBatches = ev->plan.numSubBatches;
    e.arenaBytes = ev->plan.arenaBytes;
    e.instructions = static_cast<int64_t>(ev->plan.round.size());
    e.seconds = ev->sim.iterationSeconds;
  }
  return r;
}

Error writePlanReports(OutputDir &out, const PlanReport &r) {
  if (auto err = out.write("plan.json", planToJson(r) + "\n"))
    return err;
  if (auto err = out.write("trace.json", planToTrace(r)))
    return err;
  return out.write("report.html", planToHtml(r));
}

} // namespace memfit::tool
