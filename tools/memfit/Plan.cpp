//===- Plan.cpp - memfit plan ---------------------------------------------===//
//
// Plans one training iteration of a model under a budget and prints the
// summary (or --json). With -o DIR it also writes plan.json, trace.json and
// report.html there (the reports `memfit compile` writes, without the
// trainer); DIR appears whole or not at all.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanReport.h"
#include "codegen/SummaryText.h"
#include "compiler/support/OutputDir.h"
#include "passes/search/Pipeline.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/Planning.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::opt<bool> Json("json", cl::desc("Print one JSON object"),
                   cl::sub(planCommand()));
cl::opt<std::string> OutDir("o",
                            cl::desc("Also write plan.json, trace.json and "
                                     "report.html into this directory"),
                            cl::value_desc("DIR"), cl::init(""),
                            cl::sub(planCommand()));
cl::opt<bool> Force("force", cl::desc("Replace an existing -o directory"),
                    cl::sub(planCommand()));

int run() {
  Progress progress = makeProgress();
  // Refuse an existing directory before the (possibly long) planning.
  std::optional<OutputDir> out;
  if (!OutDir.empty()) {
    auto dir = OutputDir::create(OutDir, Force);
    if (!dir)
      return reportError(dir.takeError());
    out.emplace(std::move(*dir));
  }
  auto session = std::make_unique<PlanningSession>();
  auto outcome = planChosen(session, /*keepWeightData=*/false, progress);
  if (!outcome)
    return reportError(outcome.takeError());
  PlanningSession &s = *session;
  // The files need the whole report; the printed summary its summary.
  if (out)
    progress.start("writing " + OutDir, s.tg.tasks.size() > kLargeTaskCount);
  PlanReport report =
      planReport(s, *outcome, out ? ReportDetail::Full : ReportDetail::Summary);
  if (out) {
    if (auto err = writePlanReports(*out, report))
      return reportError(std::move(err));
    if (auto err = out->commit())
      return reportError(std::move(err));
    progress.done();
  }
  if (Json)
    outs() << planSummaryJson(report) << "\n";
  else if (!quietFlag())
    printPlanSummary(outs(), report);
  return ExitOk;
}

RegisterCommand reg(planCommand(), run);

} // namespace
} // namespace memfit::tool
