//===- Report.cpp - memfit report -----------------------------------------===//
//
// memfit report PLAN.json: reads a plan.json written by `memfit compile` or
// `memfit plan -o` and prints the summary a person reads in thirty seconds
// (or --json). It needs the file only: no model, no cost model.
//
//===----------------------------------------------------------------------===//
#include "codegen/PlanJson.h"
#include "codegen/ReportHtml.h"
#include "codegen/ReportText.h"
#include "codegen/RunReport.h"
#include "compiler/support/FileUtil.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/NumericOptions.h"

#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>
#include <optional>

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
cl::opt<std::string>
    RunLog("run",
           cl::desc("A trainer's --log (JSON lines): its loss from the first "
                    "logged step to the last and its measured rate against "
                    "the plan's, in the text and in --html's plot"),
           cl::value_desc("log.jsonl"), cl::init(""), cl::sub(Cmd));
cl::opt<std::string> Html("html",
                          cl::desc("Also write the plan's report page (with "
                                   "the run's loss curve under --run) here"),
                          cl::value_desc("report.html"), cl::init(""),
                          cl::sub(Cmd));

int run() {
  auto report = readPlanJson(PlanPath);
  if (!report)
    return reportError(report.takeError());
  std::optional<RunLogData> run;
  if (!RunLog.empty()) {
    auto r = readRunLog(RunLog);
    if (!r)
      return reportError(r.takeError());
    run = std::move(*r);
  }
  ReportTextOptions opts;
  opts.source = PlanPath;
  opts.maxLayers = Layers;
  opts.maxStalls = Stalls;
  if (Json) {
    std::string text = reportToJson(*report, opts);
    if (run) {
      // One more field, the same sentence the text prints.
      nlohmann::json j = nlohmann::json::parse(text);
      j["run"] = describeRun(*report, *run);
      text = j.dump(2);
    }
    outs() << text << "\n";
  } else {
    printReportText(outs(), *report, opts);
    if (run)
      outs() << "run        " << describeRun(*report, *run) << "\n";
  }
  if (!Html.empty())
    if (auto err = writeFileAtomically(
            Html, planToHtml(*report, run ? &*run : nullptr)))
      return reportError(std::move(err));
  return ExitOk;
}

RegisterCommand reg(Cmd, run);

} // namespace
} // namespace memfit::tool
