//===- Report.cpp - memfit report -----------------------------------------===//
//
// memfit report PLAN.json: reads a plan.json written by `memfit compile` or
// `memfit plan -o` and prints the summary a person reads in thirty seconds
// (or --json). It needs the file only: no model, no cost model.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanJson.h"
#include "codegen/ReportText.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/NumericOptions.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::SubCommand Cmd("report", "Summarize a plan.json: memory, time, "
                             "traffic, per-layer decisions, stalls");
cl::opt<std::string> PlanPath(cl::Positional, cl::desc("<plan.json>"),
                              cl::Required, cl::sub(Cmd));
cl::opt<bool> Json("json", cl::desc("Print one JSON object"), cl::sub(Cmd));
cl::opt<Count> Layers("layers", cl::desc("Rows of the layer table (0: all)"),
                      cl::init(30), cl::sub(Cmd));
cl::opt<Count> Stalls("stalls", cl::desc("Stall causes listed"), cl::init(5),
                      cl::sub(Cmd));

int run() {
  auto report = readPlanJson(PlanPath);
  if (!report)
    return reportError(report.takeError());
  ReportTextOptions opts;
  opts.source = PlanPath;
  opts.maxLayers = Layers;
  opts.maxStalls = Stalls;
  if (Json)
    outs() << reportToJson(*report, opts) << "\n";
  else
    printReportText(outs(), *report, opts);
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
