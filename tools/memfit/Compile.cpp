//===- Compile.cpp - memfit compile ---------------------------------------===//
//
// Plans training under a budget and writes OUTDIR: the trainer's sources
// and CMakeLists.txt, a copy of the model (its starting weights), plan.json
// and report.txt. OUTDIR appears whole or not at all.
//
//===----------------------------------------------------------------------===//
#include "codegen/Emit.h"
#include "codegen/PlanJson.h"
#include "compiler/OutputDir.h"
#include "passes/Pipeline.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/Planning.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::opt<std::string> OutDir("o", cl::desc("Output directory"),
                            cl::value_desc("OUTDIR"), cl::Required,
                            cl::sub(compileCommand()));
cl::opt<bool> Force("force", cl::desc("Replace an existing OUTDIR"),
                    cl::sub(compileCommand()));
cl::opt<std::string>
    RuntimeDir("runtime-dir",
               cl::desc("memfit build directory the trainer links the "
                        "runtime from (default: this memfit's)"),
               cl::init(MEMFIT_BUILD_DIR), cl::sub(compileCommand()));
cl::opt<bool> Quiet("quiet", cl::desc("Print nothing on success"),
                    cl::sub(compileCommand()));

int run() {
  PlanningSession s;
  if (auto err = openSession(s, /*keepWeightData=*/false))
    return reportError(std::move(err));
  auto req = planRequest(s);
  if (!req)
    return reportError(req.takeError());
  auto out = OutputDir::create(OutDir, Force);
  if (!out)
    return reportError(out.takeError());
  auto outcome = planTraining(s.tg, s.tableFn(), *req);
  if (!outcome) {
    std::string msg = toString(outcome.takeError());
    if (isVerifierFailure(msg)) {
      errs() << "memfit: internal error: " << msg << "\n";
      return ExitInternalError;
    }
    return reportError(makeError(msg));
  }
  EmitOptions eo;
  eo.memfitBuildDir = RuntimeDir;
  auto files = emitTrainer(s.tg, outcome->plan, eo);
  if (!files)
    return reportError(files.takeError());
  for (const GeneratedFile &f : *files)
    if (auto err = out->write(f.path, f.contents))
      return reportError(std::move(err));
  if (auto err = out->copyFile(s.modelPath, eo.modelFile))
    return reportError(std::move(err));
  PlanContext ctx{s.modelPath, s.costs->device().name,
                  outcome->lowerBound.bytes, outcome->idealPeakBytes,
                  outcome->idealSeconds};
  if (auto err =
          out->write("plan.json",
                     planToJson(s.tg, outcome->plan, outcome->sim, ctx) + "\n"))
    return reportError(std::move(err));
  std::string report;
  raw_string_ostream rs(report);
  printSummary(rs, s, *outcome);
  rs.flush();
  if (auto err = out->write("report.txt", report))
    return reportError(std::move(err));
  if (auto err = out->commit())
    return reportError(std::move(err));
  if (!Quiet) {
    outs() << report;
    outs() << "wrote " << OutDir << " (build: cmake -S " << OutDir << " -B "
           << OutDir << "/build -DMEMFIT_BACKEND=cuda|cpu && cmake --build "
           << OutDir << "/build)\n";
  }
  return ExitOk;
}

RegisterCommand reg(compileCommand(), run);

} // namespace
} // namespace memfit::tool
