//===- Plan.cpp - memfit plan ---------------------------------------------===//
//
// Plans one training iteration of a model under a budget and prints the
// summary (or --json). Nothing is written.
//
//===----------------------------------------------------------------------===//
#include "passes/Pipeline.h"
#include "tools/memfit/Command.h"
#include "tools/memfit/Planning.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace memfit::tool {
namespace {

cl::opt<bool> Json("json", cl::desc("Print one JSON object"),
                   cl::sub(planCommand()));

int run() {
  PlanningSession s;
  if (auto err = openSession(s, /*keepWeightData=*/false))
    return reportError(std::move(err));
  auto req = planRequest(s);
  if (!req)
    return reportError(req.takeError());
  auto out = planTraining(s.tg, s.tableFn(), *req);
  if (!out) {
    std::string msg = toString(out.takeError());
    if (isVerifierFailure(msg)) {
      errs() << "memfit: internal error: " << msg << "\n";
      return ExitInternalError;
    }
    return reportError(makeError(msg));
  }
  if (Json)
    outs() << summaryJson(s, *out) << "\n";
  else
    printSummary(outs(), s, *out);
  return ExitOk;
}

RegisterCommand reg(planCommand(), run);

} // namespace
} // namespace memfit::tool
