//===- Compile.cpp - memfit compile ---------------------------------------===//
//
// Plans training under a budget, and the evaluation program beside it, and
// writes OUTDIR: the trainer's sources and CMakeLists.txt, a copy of the
// model (its starting weights), and the reports: plan.json, trace.json,
// report.html and report.txt (what `memfit report plan.json` prints).
// OUTDIR appears whole or not at all.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emit.h"
#include "codegen/PlanReport.h"
#include "codegen/ReportText.h"
#include "codegen/SummaryText.h"
#include "compiler/onnx/OnnxImport.h"
#include "compiler/support/OutputDir.h"
#include "passes/search/Pipeline.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/Planning.h"

#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::opt<std::string> OutDir("o", cl::desc("Output directory"),
                            cl::value_desc("OUTDIR"), cl::Required,
                            cl::sub(compileCommand()));
cl::opt<bool> Force("force", cl::desc("Replace an existing OUTDIR"),
                    cl::sub(compileCommand()));
cl::opt<bool> Json("json",
                   cl::desc("Print the plan summary as one JSON object"),
                   cl::sub(compileCommand()));
cl::opt<std::string>
    RuntimeDir("runtime-dir",
               cl::desc("memfit build directory the trainer links the "
                        "runtime from (default: this memfit's)"),
               cl::init(MEMFIT_BUILD_DIR), cl::sub(compileCommand()));

int run() {
  Progress progress = makeProgress();
  auto out = OutputDir::create(OutDir, Force);
  if (!out)
    return reportError(out.takeError());
  auto session = std::make_unique<PlanningSession>();
  auto outcome = planChosen(session, /*keepWeightData=*/false, progress);
  if (!outcome)
    return reportError(outcome.takeError());
  PlanningSession &s = *session;
  planEvaluationFor(s, *outcome, progress);
  bool large = s.tg.tasks.size() > kLargeTaskCount;
  progress.start("generating the trainer", large);
  EmitOptions eo;
  eo.memfitBuildDir = RuntimeDir;
  auto nvmeDir = nvmeDirectory();
  if (!nvmeDir)
    return reportError(nvmeDir.takeError());
  eo.nvmeDir = *nvmeDir;
  if (s.evalOutcome)
    eo.evaluation = {&s.evalTg, &s.evalOutcome->plan, ""};
  else
    eo.evaluation.why = s.evalWhy;
  auto files = emitTrainer(outcome->scheduledGraph(s.tg), outcome->plan, eo);
  if (!files)
    return reportError(files.takeError());
  for (const GeneratedFile &f : *files)
    if (auto err = out->write(f.path, f.contents))
      return reportError(std::move(err));
  if (auto err = out->copyFile(s.modelPath, eo.modelFile))
    return reportError(std::move(err));
  // External weight data travels with the model copy (the importer has
  // already checked that every location stays inside the model's folder).
  auto locations = externalDataFiles(s.modelPath);
  if (!locations)
    return reportError(locations.takeError());
  std::string dir = llvm::sys::path::parent_path(s.modelPath).str();
  for (const std::string &loc : *locations) {
    llvm::SmallString<256> from(dir.empty() ? "." : dir);
    llvm::sys::path::append(from, loc);
    if (auto err = out->copyFile(from.str().str(), loc))
      return reportError(std::move(err));
  }
  progress.done();
  progress.start("writing the reports", large);
  PlanReport report = planReport(s, *outcome, ReportDetail::Full);
  if (auto err = writePlanReports(*out, report))
    return reportError(std::move(err));
  std::string text;
  raw_string_ostream ts(text);
  ReportTextOptions ro;
  ro.source = OutDir + "/plan.json";
  printReportText(ts, report, ro);
  ts.flush();
  if (auto err = out->write("report.txt", text))
    return reportError(std::move(err));
  if (auto err = out->commit())
    return reportError(std::move(err));
  progress.done();
  if (Json) {
    outs() << planSummaryJson(report) << "\n";
  } else if (!quietFlag()) {
    printPlanSummary(outs(), report);
    outs() << "wrote " << OutDir << " (build: cmake -S " << OutDir << " -B "
           << OutDir << "/build -DMEMFIT_BACKEND=cuda|cpu && cmake --build "
           << OutDir << "/build; inspect: memfit report " << OutDir
           << "/plan.json, open " << OutDir << "/report.html, or load "
           << OutDir << "/trace.json in Perfetto)\n";
  }
  return ExitOk;
}

RegisterCommand reg(compileCommand(), run);

} // namespace
} // namespace memfit::tool
